import { sql } from 'drizzle-orm';
import type { Db } from '../../../db/client.ts';
import { MAX_PRINTED_PER_JSONB_BYTE } from '../../contacts/data-sql.ts';

/**
 * Enrolment and resumption from the event path: ONE statement, run by the event writer inside the
 * event's own transaction (so a rolled-back event starts and resumes nothing).
 *
 * - Resume: WAITING executions of this contact waiting for this event name move to their `event`
 *   branch (RUNNING, due now) with the event's data merged into their context; the WAIT_FOR_EVENT
 *   step row completes. Without an `event` branch the execution ends COMPLETED.
 * - Enrol: every enabled workflow of the project whose trigger is this event name gets a new
 *   RUNNING execution at its TRIGGER step, due now — unless the contact has an active execution of
 *   it (the partial unique index), or already entered it and it does not allow re-entry, or the
 *   event was caused by workflows nested MAX_WORKFLOW_DEPTH deep (the loop guard).
 *
 * The depth of an event caused by a workflow step is carried in the transaction-local setting
 * `herald.workflow_depth` (set by the step that writes the event, see `withWorkflowDepth`).
 */

export const MAX_WORKFLOW_DEPTH = 5;

/**
 * An execution's context (its triggering event's data, the start call's context, and each awaited
 * event's data merged in) is at most this many bytes as PostgreSQL prints it. An awaited event
 * whose data would take it over resumes the execution without merging it: the wait step's output
 * says `dataMerged: false`, and the event itself is stored as any other. Unbounded, a path of 199
 * waits could grow one context to 50 MB, and the engine loads the contexts of every execution it
 * claims. (The check prints the merge only past 26 KB of jsonb, as contact data's does.)
 */
export const MAX_EXECUTION_CONTEXT_BYTES = 1024 * 1024;

/** A UUID v7 (decisions.md § 2: ids sort by creation time) for the time `at`, built in SQL (PostgreSQL ≥ 15 has no uuidv7()). */
const uuidV7Sql = (at: string) => `(lpad(to_hex((extract(epoch FROM ${at}) * 1000)::bigint), 12, '0') || '7'
      || substr(md5(random()::text), 1, 3) || to_hex(8 + floor(random() * 4)::int) || substr(md5(random()::text), 1, 15))::uuid`;

/**
 * The enrolment and resumption above as CTEs over `events`, a CTE of events with the columns (id,
 * project_id, contact_id, name, data, created_at), no two of them sharing a contact and a name (see
 * enrolmentWaves); events without a contact start nothing. The event writer puts them in the
 * statement that inserts the events (events/record.ts), so they cost no round trip of their own.
 * Data-modifying CTEs run whether or not the statement reads them; `resumed` and `entered` list
 * what they did.
 */
export function workflowEnrolCtes(events: string): string {
  return `depth AS (
  SELECT COALESCE(NULLIF(current_setting('herald.workflow_depth', true), ''), '0')::int AS d
), waiting AS (
  SELECT x.id, e.id AS event_id, e.name, e.data, e.created_at AS at,
         (SELECT t.to_step_id FROM workflow_transitions t WHERE t.from_step_id = x.current_step_id AND t.branch = 'event') AS next,
         (e.data IS NULL OR pg_column_size(x.context || e.data) <= ${Math.floor(MAX_EXECUTION_CONTEXT_BYTES / MAX_PRINTED_PER_JSONB_BYTE)}
            OR octet_length((x.context || e.data)::text) <= ${MAX_EXECUTION_CONTEXT_BYTES}) AS merges
    FROM ${events} e
    JOIN workflow_executions x ON x.project_id = e.project_id AND x.contact_id = e.contact_id AND x.status = 'WAITING' AND x.waiting_event = e.name
), resumed AS (
  UPDATE workflow_executions x
     SET status = CASE WHEN w.next IS NULL THEN 'COMPLETED' ELSE 'RUNNING' END,
         current_step_id = COALESCE(w.next, x.current_step_id),
         context = CASE WHEN w.merges THEN x.context || COALESCE(w.data, '{}'::jsonb) ELSE x.context END,
         waiting_event = NULL,
         due_at = CASE WHEN w.next IS NULL THEN NULL ELSE w.at END,
         completed_at = CASE WHEN w.next IS NULL THEN w.at ELSE NULL END,
         updated_at = w.at
    FROM waiting w
   WHERE x.id = w.id AND x.status = 'WAITING' AND x.waiting_event = w.name
  RETURNING x.id, w.event_id, w.name, w.at, w.merges
), finished_waits AS (
  UPDATE workflow_step_executions s
     SET status = 'COMPLETED', completed_at = r.at,
         output = jsonb_build_object('branch', 'event', 'eventName', r.name, 'eventId', r.event_id)
                  || CASE WHEN r.merges THEN '{}'::jsonb ELSE '{"dataMerged": false}'::jsonb END
    FROM resumed r
   WHERE s.execution_id = r.id AND s.status = 'WAITING'
), entered AS (
  INSERT INTO workflow_executions (id, project_id, workflow_id, contact_id, status, current_step_id, context, depth, due_at, started_at, updated_at)
  SELECT ${uuidV7Sql('e.created_at')}, w.project_id, w.id, e.contact_id, 'RUNNING', s.id, COALESCE(e.data, '{}'::jsonb), depth.d, e.created_at, e.created_at, e.created_at
    FROM ${events} e
    JOIN workflows w ON w.project_id = e.project_id AND w.enabled AND w.event_name = e.name
    JOIN workflow_steps s ON s.workflow_id = w.id AND s.type = 'TRIGGER'
   CROSS JOIN depth
   WHERE e.contact_id IS NOT NULL AND depth.d <= ${MAX_WORKFLOW_DEPTH}
     AND (w.allow_reentry OR NOT EXISTS (SELECT 1 FROM workflow_executions p WHERE p.workflow_id = w.id AND p.contact_id = e.contact_id))
     -- A workflow being deleted right now is waited for, then skipped (not an FK error in the event's transaction).
     FOR KEY SHARE OF w
  ON CONFLICT DO NOTHING
  RETURNING id
)`;
}

/**
 * The CTEs alone, for events already written (the later enrolment waves of recordEventsWith in
 * events/record.ts): a named prepared statement, its CTEs parsed and planned once per connection.
 * $1 is the events as RECORD_EVENTS_SQL takes them.
 */
export const ENROL_WRITTEN_EVENTS_SQL = {
  name: 'herald_workflows_on_events_v7',
  text: `
WITH ev AS (
  SELECT * FROM jsonb_to_recordset($1::jsonb) AS e(id text, project_id text, contact_id text, name text, data jsonb, created_at timestamptz)
), ${workflowEnrolCtes('ev')}
SELECT 1`,
} as const;

/**
 * Events in as few groups ("waves") as their order allows, for one enrolment statement each.
 * Events of different (contact, name) pairs cannot affect each other here (an execution waits for
 * one name; a workflow has one trigger name), so they share a wave; a second event of the same
 * pair must see what the first one did, so it goes in the next wave, in order. Events without a
 * contact go in the first.
 */
export function enrolmentWaves<E extends { contactId: string | null; name: string }>(events: E[]): E[][] {
  const waves: E[][] = [];
  const seen = new Map<string, number>();
  for (const e of events) {
    const pair = `${e.contactId}\u0000${e.name}`;
    const wave = e.contactId ? (seen.get(pair) ?? 0) : 0;
    if (e.contactId) seen.set(pair, wave + 1);
    (waves[wave] ??= []).push(e);
  }
  return waves;
}

/** Runs `fn` with events it writes counted as caused by a workflow execution of `depth` (the loop guard). */
export async function withWorkflowDepth<T>(tx: Db, depth: number, fn: () => Promise<T>): Promise<T> {
  await tx.execute(sql`SELECT set_config('herald.workflow_depth', ${String(depth)}, true)`);
  try {
    return await fn();
  } finally {
    // After a failed statement the transaction is aborted anyway; keep the original error.
    await tx.execute(sql`SELECT set_config('herald.workflow_depth', '', true)`).catch(() => {});
  }
}
