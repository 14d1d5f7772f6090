import { sql } from 'drizzle-orm';
import type pg from 'pg';
import type { Db } from '../../../db/client.ts';

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

export type WorkflowEvent = {
  id: string;
  projectId: string;
  contactId: string | null;
  name: string;
  data: Record<string, unknown> | null;
  createdAt: Date;
};

/** A UUID v7 (decisions.md § 2: ids sort by creation time) for the event's time $5, built in SQL (PostgreSQL ≥ 15 has no uuidv7()). */
const UUID_V7_SQL = `(lpad(to_hex((extract(epoch FROM $5::timestamptz) * 1000)::bigint), 12, '0') || '7'
      || substr(md5(random()::text), 1, 3) || to_hex(8 + floor(random() * 4)::int) || substr(md5(random()::text), 1, 15))::uuid`;

/**
 * A named prepared statement on the raw client, the exception docs/development.md allows for
 * benchmarked hot statements: it runs in every event's transaction, and as a named statement its
 * CTEs are parsed and planned once per connection instead of on every event.
 */
const ENROL_SQL = {
  name: 'herald_workflows_on_event_v3',
  text: `
WITH depth AS (
  SELECT COALESCE(NULLIF(current_setting('herald.workflow_depth', true), ''), '0')::int AS d
), waiting AS (
  SELECT x.id,
         (SELECT t.to_step_id FROM workflow_transitions t WHERE t.from_step_id = x.current_step_id AND t.branch = 'event') AS next
    FROM workflow_executions x
   WHERE x.project_id = $1 AND x.contact_id = $2 AND x.status = 'WAITING' AND x.waiting_event = $3
), resumed AS (
  UPDATE workflow_executions x
     SET status = CASE WHEN w.next IS NULL THEN 'COMPLETED' ELSE 'RUNNING' END,
         current_step_id = COALESCE(w.next, x.current_step_id),
         context = x.context || COALESCE($4::jsonb, '{}'::jsonb),
         waiting_event = NULL,
         due_at = CASE WHEN w.next IS NULL THEN NULL ELSE $5::timestamptz END,
         completed_at = CASE WHEN w.next IS NULL THEN $5::timestamptz ELSE NULL END,
         updated_at = $5::timestamptz
    FROM waiting w
   WHERE x.id = w.id AND x.status = 'WAITING' AND x.waiting_event = $3
  RETURNING x.id
), finished_waits AS (
  UPDATE workflow_step_executions s
     SET status = 'COMPLETED', completed_at = $5::timestamptz,
         output = jsonb_build_object('branch', 'event', 'eventName', $3::text, 'eventId', $6::text)
    FROM resumed r
   WHERE s.execution_id = r.id AND s.status = 'WAITING'
), entered AS (
  INSERT INTO workflow_executions (id, project_id, workflow_id, contact_id, status, current_step_id, context, depth, due_at, started_at, updated_at)
  SELECT ${UUID_V7_SQL}, w.project_id, w.id, $2, 'RUNNING', s.id, COALESCE($4::jsonb, '{}'::jsonb), depth.d, $5::timestamptz, $5::timestamptz, $5::timestamptz
    FROM workflows w
    JOIN workflow_steps s ON s.workflow_id = w.id AND s.type = 'TRIGGER'
   CROSS JOIN depth
   WHERE w.project_id = $1 AND w.enabled AND w.event_name = $3 AND depth.d <= ${MAX_WORKFLOW_DEPTH}
     AND (w.allow_reentry OR NOT EXISTS (SELECT 1 FROM workflow_executions p WHERE p.workflow_id = w.id AND p.contact_id = $2))
     -- A workflow being deleted right now is waited for, then skipped (not an FK error in the event's transaction).
     FOR KEY SHARE OF w
  ON CONFLICT DO NOTHING
  RETURNING id
)
SELECT (SELECT count(*) FROM resumed)::int AS resumed, (SELECT count(*) FROM entered)::int AS entered`,
} as const;

/**
 * THE call from the event writer into the workflow engine (see the module comment). `db` is the
 * event's transaction. Events without a contact start nothing.
 */
export async function workflowsOnEvent(db: Db, e: WorkflowEvent): Promise<{ resumed: number; entered: number }> {
  if (!e.contactId) return { resumed: 0, entered: 0 };
  const client = clientOf(db);
  const data = e.data == null ? null : JSON.stringify(e.data);
  const { rows } = await client.query<{ resumed: number; entered: number }>({
    ...ENROL_SQL,
    values: [e.projectId, e.contactId, e.name, data, e.createdAt.toISOString(), e.id],
  });
  return rows[0];
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

export function clientOf(db: Db): pg.PoolClient | pg.Pool {
  const client = (db as Db & { $client?: pg.Pool | pg.PoolClient }).$client;
  if (!client) throw new Error('workflowsOnEvent needs a node-postgres Drizzle handle');
  return client;
}
