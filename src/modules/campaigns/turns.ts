import { sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { tryLockKey } from '../../db/key-lock.ts';

/**
 * How the `campaign-send` workers are shared between projects' audience reads (a scheduled start's
 * count, a fan-out batch), which can each take up to the condition bound (10 s):
 *
 * - A project's reads take turns: one at a time per project, across every worker process. The
 *   turn is a transaction-scoped advisory lock, taken without waiting inside the read's own
 *   transaction: a job that finds it taken reads nothing, ends at once, and its successor tries
 *   again a little later (nextTurnAt).
 * - A read first gets QUICK_AUDIENCE_MS. One that outruns it is read again in a slow lane, with the
 *   full bound: SLOW_AUDIENCE_LANES of them at a time per process, all projects together, and the
 *   campaign's later reads go there directly. Sign-up is open, so one tenant can be many
 *   projects: with turns alone, two projects' slow audiences held both workers, and every other
 *   project's campaigns waited behind them. Now the other worker is held at most QUICK_AUDIENCE_MS
 *   by a read, whatever the number of such projects.
 */

/** `campaign-send` workers per process (jobs.ts). */
export const CAMPAIGN_WORKERS = 2;

/** What an audience read gets before it is taken for a slow one. An ALL audience of a million contacts is counted in about 0.1 s. */
export const QUICK_AUDIENCE_MS = 1_000;

/** Slow audience reads at once per process: the rest of its workers stay for quick ones. */
export const SLOW_AUDIENCE_LANES = CAMPAIGN_WORKERS - 1;

/** The slow lanes of a process (ctx.slowAudienceReads): a lane, or null at once when all are taken. */
export type SlowAudienceLanes = { tryTake(): (() => void) | null };

export function slowAudienceLanes(lanes = SLOW_AUDIENCE_LANES): SlowAudienceLanes {
  let inUse = 0;
  return {
    tryTake() {
      if (inUse >= lanes) return null;
      inUse++;
      let released = false;
      return () => {
        if (released) return;
        released = true;
        inUse--;
      };
    },
  };
}

const turnKey = (projectId: string) => `campaign-audience:${projectId}`;

/** Takes the project's turn for the rest of the caller's transaction; false when another read holds it. */
export const takeAudienceTurn = (tx: Db, projectId: string): Promise<boolean> => tryLockKey(tx, turnKey(projectId));

const RETRY_MS_PER_CAMPAIGN = 500;
const MIN_RETRY_MS = 1_000;
/** Well below the watchdog's 30 s (recovery.ts), which would take a longer wait for a lost job. */
const MAX_RETRY_MS = 15_000;

/**
 * When a campaign whose project's turn was taken tries again: 0.5 s per campaign of the project
 * that may be waiting for it (SENDING, or SCHEDULED and due), from 1 s to 15 s, ±25 % so they do
 * not come back together. Up to 30 waiting campaigns, a project's come back about twice a second in
 * all, whatever their number; past that, n ÷ 15 s a second (each such job costs a few milliseconds).
 */
export async function nextTurnAt(db: Db, projectId: string): Promise<Date> {
  const cap = MAX_RETRY_MS / RETRY_MS_PER_CAMPAIGN;
  const { rows } = await db.execute<{ n: number }>(sql`
    SELECT count(*)::int AS n FROM (
      SELECT 1 FROM campaigns
       WHERE project_id = ${projectId}
         AND (status = 'SENDING' OR (status = 'SCHEDULED' AND scheduled_for <= now()))
       LIMIT ${cap}
    ) AS waiting`);
  const base = Math.min(MAX_RETRY_MS, Math.max(MIN_RETRY_MS, rows[0].n * RETRY_MS_PER_CAMPAIGN));
  return new Date(Date.now() + base * (0.75 + Math.random() * 0.5));
}
