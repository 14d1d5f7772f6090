import { sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { type Db, type Tx, withTransaction } from '../../db/client.ts';
import { forgetPartition } from './counts.ts';

/**
 * The monthly partitions of `events` (migration 0007 made the table partitioned by created_at):
 * the months ahead are created before their first event, months wholly older than
 * EVENT_RETENTION_DAYS are dropped, and the older rows of the month that straddles the cutoff are
 * deleted in bounded batches. Partitions are named events_YYYY_MM and cover [first of the month,
 * first of the next) in UTC; rows of a month without one wait in events_default until the month is
 * created, when they move into it.
 */

/** Months created ahead of the current one (migration 0007 creates the same). */
export const MONTHS_AHEAD = 3;
const PARTITION_NAME = /^events_(\d{4})_(\d{2})$/;
// Arbitrary constant shared by every Herald process: one partition change at a time.
const PARTITION_LOCK = 728_145_003;
// DDL on the partitioned table waits for running queries; past this it gives up until the next run
// rather than queue every read and write of events behind its lock request.
const LOCK_TIMEOUT = '3s';
const DELETE_BATCH = 5_000;
const DELETE_BATCHES_PER_RUN = 40;
/**
 * Each partition's statistics are refreshed by autovacuum after this many changed rows, not a
 * tenth of the partition (as migration 0029 set for the existing ones): a project the last
 * ANALYZE did not see is estimated at one row, and its lists sort all of its events.
 */
export const ANALYZE_AFTER_CHANGES = 20_000;

export type PartitionMaintenance = { created: string[]; dropped: string[]; deleted: number };

const monthStart = (year: number, month: number): Date => new Date(Date.UTC(year, month, 1));
const partitionName = (start: Date): string => `events_${start.getUTCFullYear()}_${String(start.getUTCMonth() + 1).padStart(2, '0')}`;
const nextMonth = (start: Date): Date => monthStart(start.getUTCFullYear(), start.getUTCMonth() + 1);
// DDL takes no bind parameters: a bound is a literal made here from a Date, never from input.
const literal = (d: Date) => sql.raw(`'${d.toISOString()}'`);

/** The run of the recurring maintenance job: idempotent, and safe when several workers run it. */
export async function maintainEventPartitions(ctx: AppContext): Promise<PartitionMaintenance> {
  const now = ctx.clock.now();
  const retentionDays = ctx.config.eventRetentionDays;
  const cutoff = retentionDays === undefined ? null : new Date(now.getTime() - retentionDays * 86_400_000);
  const dropped = cutoff ? await dropExpiredPartitions(ctx, cutoff) : [];
  const created: string[] = [];
  for (const start of await monthsToCreate(ctx, now, cutoff)) {
    if (await createPartition(ctx, start)) created.push(partitionName(start));
  }
  const deleted = cutoff ? await deleteExpiredRows(ctx, cutoff) : 0;
  return { created, dropped, deleted };
}

/** The current month, the months ahead, and the months of rows waiting in the default partition. */
async function monthsToCreate(ctx: AppContext, now: Date, cutoff: Date | null): Promise<Date[]> {
  const current = monthStart(now.getUTCFullYear(), now.getUTCMonth());
  const months = new Map<string, Date>();
  for (let i = 0, m = current; i <= MONTHS_AHEAD; i++, m = nextMonth(m)) months.set(partitionName(m), m);
  const { rows } = await ctx.database.db.execute<{ month: string }>(sql`
    SELECT DISTINCT to_char(date_trunc('month', created_at AT TIME ZONE 'UTC'), 'YYYY-MM') AS month FROM events_default`);
  for (const { month } of rows) {
    const start = new Date(`${month}-01T00:00:00Z`);
    // Rows of a month wholly past retention are deleted where they are.
    if (!cutoff || nextMonth(start) > cutoff) months.set(partitionName(start), start);
  }
  const existing = new Set((await partitions(ctx)).map((p) => p.name));
  return [...months.values()].filter((m) => !existing.has(partitionName(m)));
}

/** The monthly partitions that exist, oldest first. */
export async function partitions(ctx: AppContext): Promise<{ name: string; start: Date; end: Date }[]> {
  const { rows } = await ctx.database.db.execute<{ name: string }>(sql`
    SELECT c.relname AS name FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
     WHERE i.inhparent = 'events'::regclass ORDER BY c.relname`);
  return rows.flatMap(({ name }) => {
    const m = PARTITION_NAME.exec(name);
    if (!m) return [];
    const start = monthStart(Number(m[1]), Number(m[2]) - 1);
    return [{ name, start, end: nextMonth(start) }];
  });
}

/** Under the partition lock: whether another process created (or dropped) it first. */
async function partitionExists(tx: Db, name: string): Promise<boolean> {
  const { rows } = await tx.execute<{ exists: boolean }>(sql`SELECT to_regclass(${name}) IS NOT NULL AS exists`);
  return rows[0].exists;
}

async function underPartitionLock<T>(ctx: AppContext, fn: (t: Tx) => Promise<T>): Promise<T> {
  return withTransaction(ctx.database, async (t) => {
    await t.client.query(`SET LOCAL lock_timeout = '${LOCK_TIMEOUT}'`);
    await t.client.query('SELECT pg_advisory_xact_lock($1)', [PARTITION_LOCK]);
    return fn(t);
  });
}

/**
 * Creates one month's partition, moving into it the rows of that month waiting in the default
 * partition (PostgreSQL refuses a partition whose range has rows in the default one). The default
 * partition is locked first, so no row of the month can arrive between the move and the attach.
 * False when another process created it first.
 */
async function createPartition(ctx: AppContext, start: Date): Promise<boolean> {
  const name = partitionName(start);
  const table = sql.identifier(name);
  const [from, to] = [literal(start), literal(nextMonth(start))];
  return underPartitionLock(ctx, async ({ tx }) => {
    if (await partitionExists(tx, name)) return false;
    await tx.execute(sql`LOCK TABLE events_default IN ACCESS EXCLUSIVE MODE`);
    await tx.execute(sql`
      CREATE TABLE ${table} (LIKE events INCLUDING DEFAULTS)
        WITH (autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = ${sql.raw(String(ANALYZE_AFTER_CHANGES))})`);
    await tx.execute(sql`
      WITH moved AS (DELETE FROM events_default WHERE created_at >= ${from} AND created_at < ${to} RETURNING *)
      INSERT INTO ${table} (id, project_id, contact_id, name, data, created_at)
      SELECT id, project_id, contact_id, name, data, created_at FROM moved`);
    await tx.execute(sql`ALTER TABLE events ATTACH PARTITION ${table} FOR VALUES FROM (${from}) TO (${to})`);
    return true;
  });
}

/** Drops the partitions whose whole month is older than the cutoff, their rows leaving the event counts (counts.ts). */
async function dropExpiredPartitions(ctx: AppContext, cutoff: Date): Promise<string[]> {
  const dropped: string[] = [];
  for (const p of await partitions(ctx)) {
    if (p.end > cutoff) continue;
    const done = await underPartitionLock(ctx, async ({ tx }) => {
      if (!(await partitionExists(tx, p.name))) return false;
      await forgetPartition(tx, p);
      await tx.execute(sql`DROP TABLE ${sql.identifier(p.name)}`);
      return true;
    });
    if (done) dropped.push(p.name);
  }
  return dropped;
}

/**
 * Deletes the rows older than the cutoff that dropping whole months left: those of the month that
 * straddles it (and any in the default partition), a batch per statement, a bounded number per run.
 */
async function deleteExpiredRows(ctx: AppContext, cutoff: Date): Promise<number> {
  let deleted = 0;
  for (let i = 0; i < DELETE_BATCHES_PER_RUN; i++) {
    const { rowCount } = await ctx.database.db.execute(sql`
      DELETE FROM events AS e
       USING (SELECT id, created_at FROM events WHERE created_at < ${cutoff.toISOString()}::timestamptz LIMIT ${DELETE_BATCH}) AS old
       WHERE e.id = old.id AND e.created_at = old.created_at AND e.created_at < ${cutoff.toISOString()}::timestamptz`);
    deleted += rowCount ?? 0;
    if ((rowCount ?? 0) < DELETE_BATCH) break;
  }
  return deleted;
}
