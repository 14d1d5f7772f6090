import type { AppContext } from '../../context.ts';
import { logGroupFailure, writeGroups } from '../../db/write-groups.ts';
import { markClicked, markOpened } from '../emails/lifecycle.ts';

/** Hits of one email written by one statement at most (its events are one multi-row insert). */
const MAX_GROUP = 500;

export type EngagementRecorder = {
  open: (emailId: string, at: Date) => Promise<boolean>;
  click: (emailId: string, link: string, at: Date) => Promise<boolean>;
};

/**
 * Records opens and clicks for a runtime (`ctx.recordEngagement`), one transaction at a time per
 * email and kind in this process: hits of an email arriving while one is being written wait in
 * memory, not on its row lock holding a pooled connection, and go together in the next
 * transaction (db/write-groups.ts: each answered once its rows committed; a failed group runs one
 * by one). Anyone holding a link can replay it: 100 concurrent requests for one email's pixel
 * held 19 of the 20 connections waiting on that row, and another tenant's request waited 3.8 s.
 */
export function engagementRecorder(contextOf: () => AppContext): EngagementRecorder {
  const group = <I>(write: (emailId: string, inputs: I[]) => Promise<boolean>) =>
    writeGroups<{ emailId: string; hit: I }, boolean>({
      maxInFlight: 1,
      maxSize: MAX_GROUP,
      // Hits of one email add up: they share a group.
      conflictKeys: () => [],
      runOne: (h) => write(h.emailId, [h.hit]),
      runMany: async (hits) => {
        const written = await write(
          hits[0].emailId,
          hits.map((h) => h.hit),
        );
        return hits.map(() => written);
      },
      onGroupFailed: (err, size) => logGroupFailure(contextOf(), 'recording opens or clicks', err, size),
    });
  const opens = group<Date>((emailId, ats) => markOpened(contextOf(), emailId, ats));
  const clicks = group<{ link: string; at: Date }>((emailId, hits) => markClicked(contextOf(), emailId, hits));
  return {
    open: (emailId, at) => opens.submit(emailId, { emailId, hit: at }),
    click: (emailId, link, at) => clicks.submit(emailId, { emailId, hit: { link, at } }),
  };
}
