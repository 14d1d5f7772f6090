import { type SQL, sql } from 'drizzle-orm';
import { z } from 'zod';
import type pg from 'pg';
import type { AppContext } from '../../context.ts';
import type { Db } from '../../db/client.ts';
import { BATCH_STATEMENT_MS, nextBatchSize, runBatch } from '../../db/batches.ts';
import { isStatementTimeout, setStatementTimeout } from '../../db/statement-timeout.ts';
import { type BusySlots, busySlots } from '../../http/busy-slots.ts';
import { ApiError } from '../../http/errors.ts';
import { loggableError } from '../../loggable-error.ts';
import { randomBase62 } from '../../db/ids.ts';
import type { QueueDef } from '../../jobs/boss.ts';
import { carryUsageOfRemoved } from '../billing/usage.ts';
import { afterContactsDeleted } from '../contacts/deleted.ts';

/**
 * Removing a project's rows, for a reset (in the request) and a delete (in a job), in short batches.
 *
 * Both used to be one transaction: at 300,000 contacts, 1,000,000 events and 300,000 emails a reset
 * held one pooled connection and the project row FOR UPDATE for 32 s (every insert of the project
 * waits on that lock: each checks its foreign key to the project), and a delete was one cascading
 * statement of 15.7 s. Now each batch is a transaction of its own of about 200 ms under a statement
 * timeout, table by table, children before parents, so no connection or lock is held between
 * batches; one reset of a project at a time and a few per process (ctx.projectPurges).
 */

/** Resets one project may have under way at once, in a process. */
export const PROJECT_PURGES_PER_PROJECT = 1;
/** Resets of all projects at once, in a process: each holds one pooled connection while a batch runs. */
export const PROJECT_PURGES_PER_PROCESS = 2;

/** The counters of resets under way (ctx.projectPurges). */
export const projectPurgeSlots = (): BusySlots =>
  busySlots({
    perProject: PROJECT_PURGES_PER_PROJECT,
    perProcess: PROJECT_PURGES_PER_PROCESS,
    projectBusy: 'This project already has a reset under way',
    processBusy: 'The server is busy resetting projects',
  });

/**
 * Rows a batch deletes: from `first`, at most doubling, kept near `targetMs` (measured: an event
 * with the counters its trigger keeps about 15-20 µs, a contact about 60 µs for the foreign keys
 * that point at it, an email's content about 40 µs), between `min` and `max`. A batch PostgreSQL
 * runs longer than `statementMs` is cancelled: the purge stops there and says how far it got.
 * Tests lower these.
 */
export const PROJECT_PURGE_BATCH = { first: 500, min: 50, max: 10_000, targetMs: 200, statementMs: BATCH_STATEMENT_MS };

/** What a batch did: rows it deleted, and whether the table has no more of the project's rows to delete. */
type BatchCount = { removed: number; done: boolean };

/** One table's removal: a batch deletes at most `size` of the project's rows of `table`. */
type Step = {
  table: string;
  batch: (db: Db, projectId: string, size: number, now: Date) => Promise<BatchCount>;
};

/** A purge stopped by a batch held past its bound; `deleted` is what it did so far. */
export class PurgeStopped extends Error {
  readonly deleted: Record<string, number>;
  readonly table: string;
  constructor(table: string, deleted: Record<string, number>, statementMs: number, cause: unknown) {
    super(`a batch of ${table} took longer than ${statementMs / 1000} s (rows held by other writes?)`, { cause });
    this.table = table;
    this.deleted = deleted;
  }
}

/** Runs a statement answering `picked` and `removed`: fewer picked than `size` means the table is done. */
const counted = async (db: Db, statement: SQL, size: number): Promise<BatchCount> => {
  const { rows } = await db.execute<{ picked: number; removed: number }>(statement);
  return { removed: rows[0].removed, done: rows[0].picked < size };
};

/**
 * Deletes the next `size` rows of `table` that `where` selects, found through the index `where`
 * leads with and deleted by their primary key `keys` (a row updated meanwhile is still deleted).
 */
function byKeys(table: string, keys: string[], where: (projectId: string) => SQL = (p) => sql`project_id = ${p}`): Step {
  const t = sql.identifier(table);
  const cols = sql.join(
    keys.map((k) => sql.identifier(k)),
    sql`, `,
  );
  const match = sql.join(
    keys.map((k) => sql`x.${sql.identifier(k)} = picked.${sql.identifier(k)}`),
    sql` AND `,
  );
  return {
    table,
    batch: (db, projectId, size) =>
      counted(
        db,
        sql`
        WITH picked AS MATERIALIZED (SELECT ${cols} FROM ${t} WHERE ${where(projectId)} LIMIT ${size}),
             removed AS (DELETE FROM ${t} AS x USING picked WHERE ${match} RETURNING 1)
        SELECT (SELECT count(*) FROM picked)::int AS picked, (SELECT count(*) FROM removed)::int AS removed`,
        size,
      ),
  };
}

/**
 * The events, oldest first, by a range of events_project_created_idx: the `size`-th event's
 * (created_at, id) bounds the batch, so each partition the range does not reach is pruned.
 * Deleting them by key instead probed the primary key of every partition for each event (1,000,000
 * events: 38 s). The delete goes through the parent table: its trigger keeps the event counters.
 */
const events: Step = {
  table: 'events',
  batch: async (db, projectId, size) => {
    const { rows } = await db.execute<{ at: string; id: string }>(sql`
      SELECT created_at::text AS at, id FROM events WHERE project_id = ${projectId} ORDER BY created_at, id OFFSET ${size - 1} LIMIT 1`);
    const last = rows.at(0);
    const upTo = last ? sql`AND created_at <= ${last.at}::timestamptz AND (created_at, id) <= (${last.at}::timestamptz, ${last.id})` : sql``;
    const removed = await db.execute(sql`DELETE FROM events WHERE project_id = ${projectId} ${upTo}`);
    return { removed: removed.rowCount ?? 0, done: last === undefined };
  },
};

/**
 * The contacts, and what was written for them since the earlier steps (a reset's project takes
 * tracks and sends meanwhile): events and emails have no foreign key to a contact to cascade along
 * (contacts/deleted.ts).
 */
const contactsStep: Step = {
  table: 'contacts',
  batch: async (db, projectId, size, now) => {
    const { rows } = await db.execute<{ picked: number; ids: string[] }>(sql`
      WITH picked AS MATERIALIZED (SELECT id FROM contacts WHERE project_id = ${projectId} LIMIT ${size}),
           removed AS (DELETE FROM contacts AS x USING picked WHERE x.id = picked.id RETURNING x.id)
      SELECT (SELECT count(*) FROM picked)::int AS picked, coalesce((SELECT array_agg(id) FROM removed), '{}') AS ids`);
    await afterContactsDeleted(db, projectId, rows[0].ids, now);
    return { removed: rows[0].ids.length, done: rows[0].picked < size };
  },
};

const ofProjectWorkflows = (p: string) => sql`workflow_id IN (SELECT id FROM workflows WHERE project_id = ${p})`;
const ofProjectSegments = (p: string) => sql`segment_id IN (SELECT id FROM segments WHERE project_id = ${p})`;

/**
 * The emails of a reset, newest first (so those still queued go first), each batch holding the
 * project row FOR UPDATE as billing/usage.ts's fold expects of a reset, and carrying the month's
 * usage of the emails it deletes (carryUsageOfRemoved).
 */
const resetEmails: Step = {
  table: 'emails',
  batch: async (db, projectId, size, now) => {
    await db.execute(sql`SELECT 1 FROM projects WHERE id = ${projectId} FOR UPDATE`);
    return counted(
      db,
      sql`
      WITH picked AS MATERIALIZED (
        SELECT id FROM emails WHERE project_id = ${projectId} ORDER BY created_at DESC, id DESC LIMIT ${size}
      ), removed AS (
        DELETE FROM emails AS e USING picked WHERE e.id = picked.id AND e.project_id = ${projectId}
        RETURNING e.id, e.created_at, e.status, e.campaign_id, e.workflow_id
      ), carried AS (${carryUsageOfRemoved(projectId, now, 'removed')})
      SELECT (SELECT count(*) FROM picked)::int AS picked, (SELECT count(*) FROM removed)::int AS removed`,
      size,
    );
  },
};

/** A deleted project's emails: nothing to carry (its billing goes with it). */
const deletedEmails = byKeys('emails', ['id']);

/**
 * What a reset and a delete remove, children before parents: nothing a later step deletes is
 * referenced by a row of an earlier one, so no delete cascades into a big table. Workflows first:
 * their executions stop taking steps at once. The analytics rollups of emails and events
 * (analytics/rollups.ts, outcome-rollups.ts) go with them; the event counters (events/counts.ts)
 * follow the events' delete by trigger, and the email counters (email_counts) the emails' delete.
 */
function purgeSteps(emails: Step): Step[] {
  return [
    byKeys('workflow_step_executions', ['id'], ofProjectWorkflows),
    byKeys('workflow_executions', ['id'], ofProjectWorkflows),
    byKeys('workflows', ['id']), // and their steps and transitions (a graph of a few dozen rows)
    emails, // and their captured sources (email_raw)
    byKeys('email_contents', ['id']),
    byKeys('email_outcome_slots', ['project_id', 'slot']),
    byKeys('campaign_outcomes', ['campaign_id']),
    byKeys('campaign_outcome_slots', ['project_id', 'campaign_id', 'slot']),
    byKeys('campaign_unsubscribes', ['project_id', 'campaign_id', 'contact_id']),
    events,
    byKeys('event_name_days', ['project_id', 'name', 'day', 'shard']),
    byKeys('event_name_contacts', ['project_id', 'name', 'contact_id']),
    byKeys('campaigns', ['id']),
    byKeys('segment_members', ['segment_id', 'contact_id'], ofProjectSegments),
    byKeys('segments', ['id']),
    byKeys('templates', ['id']),
    byKeys('import_jobs', ['id']),
    byKeys('bulk_jobs', ['id']),
    byKeys('idempotency_keys', ['project_id', 'key_type', 'key']),
    contactsStep,
    byKeys('contact_fields', ['project_id', 'key']),
  ];
}

/** A reset: the project's data, keeping domains, members, keys, settings, suppressions and billing. */
export const RESET_STEPS: readonly Step[] = purgeSteps(resetEmails);

/**
 * A delete: everything, then the project row (whose cascade takes the few rows left: domains,
 * members, billing). The tables that can be big go in batches first.
 */
const DELETE_STEPS: readonly Step[] = [
  ...purgeSteps(deletedEmails),
  byKeys('event_counts', ['project_id', 'name', 'shard']),
  byKeys('event_day_counts', ['project_id', 'day', 'name', 'shard']),
  byKeys('suppressions', ['project_id', 'email']),
  byKeys('uploads', ['key']),
];

/** Tables that may not exist yet (the workflows engine ships them in its own migration). */
export async function existingTables(db: Db, names: readonly string[]): Promise<Set<string>> {
  const { rows } = await db.execute<{ name: string }>(sql`
    SELECT n AS name FROM unnest(${sql.param(names)}::text[]) AS n WHERE to_regclass('public.' || quote_ident(n)) IS NOT NULL`);
  return new Set(rows.map((r) => r.name));
}

async function presentSteps(db: Db, steps: readonly Step[]): Promise<Step[]> {
  const present = await existingTables(
    db,
    steps.map((s) => s.table),
  );
  return steps.filter((s) => present.has(s.table));
}

/**
 * Runs `steps` batch by batch, adding each table's deleted rows to `deleted`. Stops with
 * PurgeStopped (and `deleted` so far) when a batch runs past `statementMs` (default
 * PROJECT_PURGE_BATCH.statementMs); answers false, with the rest to do, once `until` (a Date.now()
 * time) has passed.
 */
export async function runPurge(
  ctx: AppContext,
  projectId: string,
  steps: readonly Step[],
  deleted: Record<string, number>,
  opts: { until?: number; statementMs?: number } = {},
): Promise<boolean> {
  const bounds = PROJECT_PURGE_BATCH;
  const until = opts.until ?? Infinity;
  const statementMs = opts.statementMs ?? bounds.statementMs;
  for (const step of await presentSteps(ctx.database.db, steps)) {
    let size = bounds.first;
    for (;;) {
      const started = performance.now();
      const now = ctx.clock.now();
      const batch = await runBatch(ctx.database, async (db) => {
        if (statementMs !== BATCH_STATEMENT_MS) await setStatementTimeout(db, statementMs);
        return step.batch(db, projectId, size, now);
      }).catch((err: unknown) => {
        if (isStatementTimeout(err)) throw new PurgeStopped(step.table, deleted, statementMs, err);
        throw err;
      });
      deleted[step.table] = (deleted[step.table] ?? 0) + batch.removed;
      if (batch.done) break;
      if (Date.now() >= until) return false;
      size = nextBatchSize(bounds, size, performance.now() - started);
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Delete: the project is gone for its users at once; its rows go in a job.

/** disabled_reason of a project whose rows are being removed (by PROJECT_PURGE_QUEUE). */
export const DELETED_REASON = 'DELETED';

/**
 * Makes the project gone for everyone, in the caller's transaction (holding the project row):
 * its keys are replaced by values no key matches, its members and invitations are removed (it
 * leaves every project list; each of its routes is a 404), and it is disabled, so the delivery
 * worker and the campaign sender send nothing more of it. False when it was already deleted.
 */
export async function markDeleted(db: Db, projectId: string): Promise<boolean> {
  const marked = await db.execute(sql`
    UPDATE projects
       SET disabled = true, disabled_reason = ${DELETED_REASON}, public_key = ${`deleted_${randomBase62(40)}`},
           secret_key = NULL, secret_key_hash = NULL, updated_at = now()
     WHERE id = ${projectId} AND disabled_reason IS DISTINCT FROM ${DELETED_REASON}`);
  if ((marked.rowCount ?? 0) === 0) return false;
  await db.execute(sql`DELETE FROM memberships WHERE project_id = ${projectId}`);
  await db.execute(sql`DELETE FROM project_invitations WHERE project_id = ${projectId}`);
  return true;
}

export const PROJECT_PURGE_QUEUE = 'project-purge';

/**
 * The DELETE request itself purges for this long at most (its batches bounded by it too): most
 * projects are gone whole before the answer. A bigger one is left to the job, which waits
 * PURGE_JOB_DELAY_MS so the two do not run at once.
 */
export const PURGE_IN_REQUEST_MS = 2_000;
export const PURGE_JOB_DELAY_MS = 5_000;

/**
 * A purge job runs this long at most, then queues its own continuation (behind the other deleted
 * projects' purges) and ends: a worker is never held by one project, and a job whose worker died
 * is taken up again after expireInSeconds.
 */
export const PURGE_SLICE_MS = 60_000;

/** Queues the purge of a project just marked deleted, in the caller's transaction (`client`): it exists only if the delete commits. */
export async function queuePurge(ctx: AppContext, projectId: string, client: pg.PoolClient): Promise<void> {
  await ctx.jobs.send(PROJECT_PURGE_QUEUE, { projectId }, { client, startAfter: new Date(Date.now() + PURGE_JOB_DELAY_MS) });
}

/**
 * The start of a deleted project's purge, in its DELETE request, for PURGE_IN_REQUEST_MS at most
 * and only when a slot of ctx.projectPurges is free; whatever is left (or a batch held past the
 * bound) is the job's. Never fails the delete, which has committed.
 */
export async function purgeInRequest(ctx: AppContext, projectId: string): Promise<void> {
  let release: () => void;
  try {
    release = ctx.projectPurges.take(projectId);
  } catch (err) {
    if (err instanceof ApiError && err.statusCode === 429) return; // busy: the job does it all
    throw err;
  }
  try {
    const statementMs = Math.min(PROJECT_PURGE_BATCH.statementMs, PURGE_IN_REQUEST_MS);
    await purgeDeletedProject(ctx, projectId, { sliceMs: PURGE_IN_REQUEST_MS, statementMs, inRequest: true });
  } catch (err) {
    ctx.log.warn({ error: loggableError(err), projectId }, 'purging a deleted project in its request stopped; its job continues');
  } finally {
    release();
  }
}

/**
 * Removes a project marked deleted, batch by batch, and at last the project row. Nothing for a
 * project that is gone or not marked (a job must never empty a live project).
 */
export async function purgeDeletedProject(
  ctx: AppContext,
  projectId: string,
  opts: { sliceMs: number; statementMs?: number; inRequest: boolean } = { sliceMs: PURGE_SLICE_MS, inRequest: false },
): Promise<void> {
  const { rows } = await ctx.database.db.execute<{ deleted: boolean }>(
    sql`SELECT disabled_reason = ${DELETED_REASON} AS deleted FROM projects WHERE id = ${projectId}`,
  );
  if (!rows[0]?.deleted) return;
  const started = Date.now();
  const deleted: Record<string, number> = {};
  const done = await runPurge(ctx, projectId, DELETE_STEPS, deleted, { until: started + opts.sliceMs, statementMs: opts.statementMs }).catch((err: unknown) => {
    if (!(err instanceof PurgeStopped)) throw err;
    throw new Error(`Purging deleted project ${projectId} stopped: ${err.message}; it is tried again`, { cause: err });
  });
  if (!done) {
    if (!opts.inRequest) await ctx.jobs.send(PROJECT_PURGE_QUEUE, { projectId });
    ctx.log.info({ projectId, deleted, ms: Date.now() - started }, 'deleted project: its purge continues in a job');
    return;
  }
  await runBatch(ctx.database, async (db) => {
    await db.execute(sql`DELETE FROM projects WHERE id = ${projectId} AND disabled_reason = ${DELETED_REASON}`);
    // The contacts its cascade took (any added during the purge) leave their events behind: events
    // have no foreign keys (contacts/deleted.ts). A statement of its own, after the one
    // that waited for their writers.
    await db.execute(sql`DELETE FROM events WHERE project_id = ${projectId}`);
  });
  ctx.log.info({ projectId, deleted, ms: Date.now() - started }, 'deleted project purged');
}

const purgePayload = z.object({ projectId: z.string() });

export const projectPurgeQueue: QueueDef<z.infer<typeof purgePayload>> = {
  name: PROJECT_PURGE_QUEUE,
  schema: purgePayload,
  handler: (ctx, data) => purgeDeletedProject(ctx, data.projectId),
  // One purge at a time per worker process (the default one poller); a failed one (a batch held
  // past its bound) is tried again later, from where it stopped.
  retryLimit: 20,
  retryDelaySeconds: 30,
  retryBackoff: true,
  expireInSeconds: 15 * 60,
};
