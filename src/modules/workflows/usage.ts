import { sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';

/**
 * What workflows reference, for the usage endpoints and the refusals built on them. Each function
 * answers one question and is called with one line from the usage code of the referenced
 * resource (templates, contact fields, event names, GET /activity/upcoming).
 */

export type WorkflowRef = { id: string; name: string };

/** Workflow SEND_EMAIL steps that send the template (a used template cannot be deleted). */
export async function workflowsUsingTemplate(db: Db, projectId: string, templateId: string): Promise<(WorkflowRef & { stepId: string })[]> {
  const { rows } = await db.execute<{ id: string; name: string; step_id: string }>(sql`
    SELECT w.id, w.name, s.id AS step_id
      FROM workflow_steps s JOIN workflows w ON w.id = s.workflow_id
     WHERE s.project_id = ${projectId} AND s.template_id = ${templateId}::uuid
     ORDER BY w.created_at, w.id, s.created_at, s.id`);
  return rows.map((r) => ({ id: r.id, name: r.name, stepId: r.step_id }));
}

/**
 * Workflows whose CONDITION steps read the field (`data.x` also matches `data.x.y`), or whose
 * UPDATE_CONTACT steps write a `data.*` field.
 */
export async function workflowsUsingField(db: Db, projectId: string, field: string): Promise<WorkflowRef[]> {
  const nested = field.startsWith('data.');
  const path = nested ? 'strict $.**.field ? (@ == $f || @ starts with $p)' : 'strict $.**.field ? (@ == $f)';
  const key = nested ? field.slice('data.'.length).split('.')[0] : null;
  const { rows } = await db.execute<WorkflowRef>(sql`
    SELECT w.id, w.name FROM workflows w
     WHERE w.project_id = ${projectId}
       AND EXISTS (
         SELECT 1 FROM workflow_steps s
          WHERE s.workflow_id = w.id
            AND ((s.type = 'CONDITION'
                  AND jsonb_path_exists(s.config, ${path}::jsonpath, jsonb_build_object('f', ${field}::text, 'p', ${`${field}.`}::text)))
              OR (s.type = 'UPDATE_CONTACT' AND ${key}::text IS NOT NULL AND s.config->'data' ? ${key ?? ''}::text)))
     ORDER BY w.created_at, w.id`);
  return rows;
}

/**
 * Workflows the event name triggers, that wait for it (WAIT_FOR_EVENT), or whose CONDITION steps
 * test whether the contact tracked it (`event.<name>`).
 */
export async function workflowsUsingEvent(db: Db, projectId: string, eventName: string): Promise<WorkflowRef[]> {
  const field = `event.${eventName}`;
  const { rows } = await db.execute<WorkflowRef>(sql`
    SELECT w.id, w.name FROM workflows w
     WHERE w.project_id = ${projectId}
       AND (w.event_name = ${eventName}
            OR EXISTS (
              SELECT 1 FROM workflow_steps s
               WHERE s.workflow_id = w.id
                 AND ((s.type = 'WAIT_FOR_EVENT' AND s.config->>'eventName' = ${eventName})
                   OR (s.type = 'CONDITION'
                       AND jsonb_path_exists(s.config, 'strict $.**.field ? (@ == $f)'::jsonpath, jsonb_build_object('f', ${field}::text))))))
     ORDER BY w.created_at, w.id`);
  return rows;
}

export type UpcomingWorkflowItem = {
  type: 'workflow';
  id: string;
  name: string;
  scheduledFor: string;
  contact: { id: string; email: string } | null;
  details: Record<string, unknown>;
};

/** Executions waiting on a timer (DELAY, a WAIT_FOR_EVENT timeout, a webhook retry), soonest first. */
export async function upcomingWorkflowSteps(db: Db, projectId: string, opts: { limit: number; now: Date }): Promise<UpcomingWorkflowItem[]> {
  const { rows } = await db.execute<{
    id: string;
    due_at: string;
    workflow_id: string;
    workflow_name: string;
    step_id: string | null;
    step_type: string | null;
    step_name: string | null;
    waiting_event: string | null;
    contact_id: string;
    email: string | null;
  }>(sql`
    SELECT e.id, to_char(e.due_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS due_at,
           e.workflow_id, w.name AS workflow_name, e.current_step_id AS step_id, s.type AS step_type, s.name AS step_name,
           e.waiting_event, e.contact_id, c.email
      FROM workflow_executions e
      JOIN workflows w ON w.id = e.workflow_id
      LEFT JOIN workflow_steps s ON s.id = e.current_step_id
      LEFT JOIN contacts c ON c.id = e.contact_id
     WHERE e.project_id = ${projectId} AND e.status = 'WAITING' AND e.due_at >= ${opts.now.toISOString()}::timestamptz
     ORDER BY e.due_at, e.id
     LIMIT ${opts.limit}`);
  return rows.map((r) => ({
    type: 'workflow',
    id: r.id,
    name: r.workflow_name,
    scheduledFor: r.due_at,
    contact: r.email === null ? null : { id: r.contact_id, email: r.email },
    details: { workflowId: r.workflow_id, executionId: r.id, stepId: r.step_id, stepType: r.step_type, stepName: r.step_name, waitingFor: r.waiting_event },
  }));
}
