import { sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { lockKey } from '../../db/key-lock.ts';
import { limitReached } from '../../http/errors.ts';

/**
 * How many workflows a project may have, and how many of them may be enabled on one trigger.
 * One event enrols its contact in every enabled workflow its name triggers (engine/enrol.ts, one
 * statement in the event's transaction), so the enabled workflows of a trigger multiply every
 * /v1/track (public key) and every segment entry into that many executions: uncapped, 5,000
 * workflows on one name made one track cost the worker 16 s.
 */
export const MAX_WORKFLOWS_PER_PROJECT = 100;
export const MAX_ENABLED_WORKFLOWS_PER_TRIGGER = 20;

/**
 * Takes the project's workflow-count lock until the transaction ends: the counts below are read
 * under it, so concurrent creates (or enables) stop exactly at the cap.
 */
export const lockProjectWorkflows = (tx: Db, projectId: string): Promise<void> => lockKey(tx, `workflows:${projectId}`);

export async function assertRoomForWorkflow(db: Db, projectId: string): Promise<void> {
  const { rows } = await db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM workflows WHERE project_id = ${projectId}`);
  if (rows[0].n >= MAX_WORKFLOWS_PER_PROJECT) {
    throw limitReached(`A project can have at most ${MAX_WORKFLOWS_PER_PROJECT} workflows; delete one first`, MAX_WORKFLOWS_PER_PROJECT);
  }
}

/** 403 when `eventName` already triggers the maximum of enabled workflows other than `workflowId`. */
export async function assertRoomOnTrigger(db: Db, projectId: string, eventName: string, workflowId: string): Promise<void> {
  const { rows } = await db.execute<{ n: number }>(sql`
    SELECT count(*)::int AS n FROM workflows
     WHERE project_id = ${projectId} AND event_name = ${eventName} AND enabled AND id <> ${workflowId}`);
  if (rows[0].n >= MAX_ENABLED_WORKFLOWS_PER_TRIGGER) {
    throw limitReached(
      `At most ${MAX_ENABLED_WORKFLOWS_PER_TRIGGER} enabled workflows can have the trigger "${eventName}"; disable one of them first`,
      MAX_ENABLED_WORKFLOWS_PER_TRIGGER,
    );
  }
}
