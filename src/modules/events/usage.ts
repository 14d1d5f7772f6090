import { sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { type BatchSizes, heldBatchConflict, nextBatchSize, runBatch } from '../../db/batches.ts';
import type { Database, Db } from '../../db/client.ts';
import { type BusySlots, busySlots } from '../../http/busy-slots.ts';
import { badRequest, conflict } from '../../http/errors.ts';
import { type EventNameUsers, usage } from '../usage/service.ts';
import { textArray } from '../contacts/sql.ts';
import { countEvents } from './counts.ts';
import { isReservedEventName } from './names.ts';
import { forgetDeletedEvents, forgetEmptyEventNameDays, forgetEventNameContacts } from '../analytics/rollups.ts';

/** GET /events/:eventName/usage and DELETE /events/:eventName; a contact's many events before the contact (contacts/service.ts). */

export type EventUsage = EventNameUsers;

const inUse = (u: EventUsage) => u.segments.length + u.campaigns.length + u.workflows.length > 0;

export async function eventUsage(db: Db, projectId: string, eventName: string): Promise<EventUsage & { eventCount: number; canDelete: boolean }> {
  const [users, counted] = await Promise.all([usage.eventNameUsers(db, projectId, eventName), countEvents(db, projectId, eventName)]);
  return { ...users, eventCount: counted, canDelete: !isReservedEventName(eventName) && !inUse(users) };
}

/**
 * Deletes of many events one project may have under way at once, in a process: DELETE
 * /events/:eventName, and DELETE /contacts/:id of a contact with more than a batch of events. One
 * DELETE of a name's 1,000,000 events ran 1.7 s as one statement, holding a pooled connection
 * throughout (a concurrent contact delete waited 2.4 s on its row locks, and deadlocked it into a 500),
 * and grows with the name: a project asking for twenty at once would have held the API process's
 * whole pool (DATABASE_POOL_SIZE). Now they run in short batches (below), one a project at a time.
 */
export const EVENT_DELETES_PER_PROJECT = 1;
/** Deletes of many events of all projects at once, in a process: each uses one pooled connection while a batch runs. */
export const EVENT_DELETES_PER_PROCESS = 4;

/** The counters of deletes of many events under way (ctx.eventDeletes). */
export const eventDeleteSlots = (): BusySlots =>
  busySlots({
    perProject: EVENT_DELETES_PER_PROJECT,
    perProcess: EVENT_DELETES_PER_PROCESS,
    projectBusy: 'This project already has a delete of many events under way',
    processBusy: 'The server is busy deleting events',
  });

/**
 * A batch of a name's events is its next events in time (events_project_name_created_idx), deleted
 * in one short transaction of its own together with their part of the analytics day counts (the
 * event counters follow by trigger, counts.ts). Its size adapts toward `targetMs`, at most
 * doubling each time.
 */
export const EVENT_DELETE_BATCH: BatchSizes = { first: 1000, min: 100, max: 50_000, targetMs: 200 };
/** Then the name's first/last-seen rows, by contact, batch by batch the same way. */
const NAME_CONTACTS_BATCH: BatchSizes = { first: 1000, min: 100, max: 20_000, targetMs: 200 };

/**
 * Deletes every event with the name: 400 for a name the service emits, 409 while a segment, a
 * workflow or the audience of a campaign not yet sent references it, 429 past
 * EVENT_DELETES_PER_PROJECT (or _PER_PROCESS) deletes under way, each before any work. Deleting a name nothing was tracked under is not an error.
 *
 * Every event of the name tracked before the delete began is deleted; one tracked while it runs is
 * deleted if its time is past the batches done, and stays otherwise, counted. Once the events are
 * gone, the name's analytics rows with nothing left to count go. A batch held past
 * BATCH_STATEMENT_MS (events locked by another delete) stops it with a 409 saying how many events
 * went; asked again, it goes on.
 */
export async function deleteEventName(ctx: AppContext, projectId: string, eventName: string): Promise<{ deleted: number }> {
  if (isReservedEventName(eventName)) {
    throw badRequest(`'${eventName}' is emitted by the service and cannot be deleted`, { eventName });
  }
  const release = ctx.eventDeletes.take(projectId);
  try {
    const users = await usage.eventNameUsers(ctx.database.db, projectId, eventName);
    if (inUse(users)) throw conflict(`Event '${eventName}' is in use and cannot be deleted`, { eventName, ...users });
    const progress = { deleted: 0 };
    try {
      await deleteEventsOf(ctx.database, projectId, { name: eventName }, progress);
      await forgetNameRollups(ctx.database, projectId, eventName);
    } catch (err) {
      throw heldBatchConflict(err, `Deleting '${eventName}' stopped after ${progress.deleted} events`, { eventName, deleted: progress.deleted });
    }
    return progress;
  } finally {
    release();
  }
}

/** Which events a batched delete takes: a name's (events_project_name_created_idx) or a contact's (events_contact_created_idx). */
type EventsOf = { name: string } | { contactId: string };

/**
 * Deletes the events batch by batch, oldest first, counting them in `progress`; stops early (false)
 * once `progress.deleted` reaches `until`.
 */
async function deleteEventsOf(database: Database, projectId: string, of: EventsOf, progress: { deleted: number }, until = Infinity): Promise<boolean> {
  let after: string | null = null;
  let size = EVENT_DELETE_BATCH.first;
  for (;;) {
    const started = performance.now();
    const batch: { deleted: number; upTo: string | null } = await runBatch(database, (db) => deleteBatchOf(db, projectId, of, after, size));
    progress.deleted += batch.deleted;
    if (batch.upTo === null) return true;
    if (progress.deleted >= until) return false;
    after = batch.upTo;
    size = nextBatchSize(EVENT_DELETE_BATCH, size, performance.now() - started);
  }
}

/** A contact of a bulk delete with more events than this has them deleted in batches first. */
export const BULK_DELETE_EVENTS_IN_JOB = 100;

/**
 * Before a bulk delete's transaction (contacts/bulk/jobs.ts): the events of its contacts that have
 * more than BULK_DELETE_EVENTS_IN_JOB, contact by contact in the batches above, at most `budget`
 * of them a run. True when none is left over that, so the job's one statement deletes at most
 * 1,000 × 100 events with the contacts. The contacts stay meanwhile (events tracked for them go
 * with their rows, contacts/deleted.ts).
 */
export async function deleteEventsOfBulkContacts(database: Database, projectId: string, contactIds: string[], budget: number): Promise<boolean> {
  const { rows } = await database.db.execute<{ id: string }>(sql`
    SELECT c.id FROM unnest(${textArray(contactIds)}) WITH ORDINALITY AS c(id, n)
     WHERE (SELECT count(*) FROM (SELECT 1 FROM events AS e WHERE e.contact_id = c.id AND e.project_id = ${projectId}
                                   LIMIT ${BULK_DELETE_EVENTS_IN_JOB + 1}) AS x) > ${BULK_DELETE_EVENTS_IN_JOB}
     ORDER BY c.n`);
  const progress = { deleted: 0 };
  for (const { id } of rows) {
    if (progress.deleted >= budget || !(await deleteEventsOf(database, projectId, { contactId: id }, progress, budget))) return false;
  }
  return true;
}

/**
 * One batch: the events after `after` up to the time of the `size`-th of them (all of them when
 * fewer are left: `upTo` null, the last batch). The time is PostgreSQL's own text of the
 * timestamp, exact to the microsecond.
 */
async function deleteBatchOf(db: Db, projectId: string, of: EventsOf, after: string | null, size: number): Promise<{ deleted: number; upTo: string | null }> {
  const from = sql`${after ?? '-infinity'}::timestamptz`;
  const which = 'name' in of ? sql`e.project_id = ${projectId} AND e.name = ${of.name}` : sql`e.contact_id = ${of.contactId} AND e.project_id = ${projectId}`;
  const { rows } = await db.execute<{ deleted: number; up_to: string | null }>(sql`
    WITH bound AS MATERIALIZED (
      SELECT e.created_at FROM events AS e
       WHERE ${which} AND e.created_at > ${from}
       ORDER BY e.created_at OFFSET ${size - 1} LIMIT 1
    ), deleted AS (
      DELETE FROM events AS e
       WHERE ${which} AND e.created_at > ${from}
         AND e.created_at <= coalesce((SELECT b.created_at FROM bound AS b), 'infinity')
      RETURNING e.project_id, e.name, e.created_at
    ), forgotten AS (${forgetDeletedEvents('deleted')})
    SELECT (SELECT count(*) FROM deleted)::int AS deleted, (SELECT b.created_at::text FROM bound AS b) AS up_to`);
  return { deleted: rows[0].deleted, upTo: rows[0].up_to };
}

/** Whether the contact has more events than one first batch: then they go in batches before it (contacts/service.ts). */
export async function hasManyEvents(db: Db, projectId: string, contactId: string): Promise<boolean> {
  const { rows } = await db.execute<{ n: number }>(sql`
    SELECT count(*)::int AS n FROM (SELECT 1 FROM events AS e WHERE e.contact_id = ${contactId} AND e.project_id = ${projectId} LIMIT ${EVENT_DELETE_BATCH.first + 1}) AS x`);
  return rows[0].n > EVENT_DELETE_BATCH.first;
}

/**
 * Before a contact with many events is deleted (a bot's millions: one statement would delete them
 * with its row, contacts/service.ts): its events, batch by batch, under the project's slot of
 * EVENT_DELETES_PER_PROJECT (429 before any work past it). The contact stays, so events tracked for
 * it meanwhile go with its row. A batch held past its bound is a 409 saying how many events went.
 */
export async function deleteContactEvents(ctx: AppContext, projectId: string, contactId: string): Promise<void> {
  const release = ctx.eventDeletes.take(projectId);
  const progress = { deleted: 0 };
  try {
    await deleteEventsOf(ctx.database, projectId, { contactId }, progress);
  } catch (err) {
    throw heldBatchConflict(err, `Deleting contact '${contactId}' stopped after ${progress.deleted} events`, { contactId, deleted: progress.deleted });
  } finally {
    release();
  }
}

/** The name's day rows that count nothing any more, then its first/last-seen rows, contact batch by batch. */
async function forgetNameRollups(database: Database, projectId: string, name: string): Promise<void> {
  await runBatch(database, (db) => forgetEmptyEventNameDays(db, projectId, name), { repeatableRead: true });
  let after: string | null = null;
  let size = NAME_CONTACTS_BATCH.first;
  for (;;) {
    const started = performance.now();
    const batch = await runBatch(database, (db) => forgetEventNameContacts(db, projectId, name, after, size), { repeatableRead: true });
    if (batch.last === null || batch.scanned < size) return;
    after = batch.last;
    size = nextBatchSize(NAME_CONTACTS_BATCH, size, performance.now() - started);
  }
}
