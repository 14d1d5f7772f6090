import { sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { tryLockKey } from '../../db/key-lock.ts';

/**
 * A project's campaign audience reads (a scheduled start's count, a fan-out batch) take turns:
 * one at a time per project, across every worker process, so one project's slow audiences hold at
 * most one of the `campaign-send` workers (up to the 10 s bound each) and other projects always
 * find the other free. The turn is a transaction-scoped advisory lock, taken without waiting inside
 * the read's own transaction: a job that finds it taken reads nothing, ends at once, and its
 * successor tries again a little later (nextTurnAt).
 */

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
