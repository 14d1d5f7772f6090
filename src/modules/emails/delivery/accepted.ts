import type { AppContext } from '../../../context.ts';
import { logGroupFailure, writeGroups } from '../../../db/write-groups.ts';
import { type Accepted, markAccepted } from '../lifecycle.ts';

/** A message this large (attachments, captured source) is recorded alone. */
const ALONE_BYTES = 1 << 20;
const MAX_GROUP = 100;

/**
 * Records accepted messages for every delivery batch of a runtime (`ctx.recordAccepted`): the first
 * at once, and those the relays accept while a record is being written together in the next
 * statement (group commit, no timer). One recorder per process rather than per batch: the batches
 * run side by side, and sharing gives fewer, larger statements (bench/README § send). A failed
 * group is recorded one by one (db/write-groups.ts), so one bad row never loses another's.
 * `contextOf` gives the runtime's context, which is built with this recorder in it.
 */
export function acceptedRecorder(contextOf: () => AppContext): (accepted: Accepted) => Promise<void> {
  const groups = writeGroups<Accepted, void>({
    maxInFlight: 1,
    maxSize: MAX_GROUP,
    sizeOf: (a) => (a.raw.length > ALONE_BYTES ? MAX_GROUP : 1),
    conflictKeys: (a) => [a.email.id],
    runOne: (a) => markAccepted(contextOf(), [a]),
    runMany: async (all) => {
      await markAccepted(contextOf(), all);
      return all.map(() => undefined);
    },
    onGroupFailed: (err, size) => logGroupFailure(contextOf(), 'recording accepted emails', err, size),
  });
  return (accepted) => groups.submit('accepted', accepted);
}
