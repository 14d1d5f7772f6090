import { sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { operatorsFor } from '../../conditions/operators.ts';
import { fieldsWithTypes } from '../contacts/fields.ts';
import type { FieldType } from '../contacts/custom-data.ts';
import { findWorkflow } from './store.ts';

/**
 * GET /workflows/fields: what a CONDITION step can filter on. Contact fields (standard and
 * `data.*` with their types), and `event.<key>` context fields: the keys of the data of recent
 * events whose names trigger or resume a workflow (of one workflow with `?workflowId=`), typed
 * from the values seen.
 */

export type WorkflowFieldItem =
  | { field: string; type: FieldType; source: 'contact'; isCustom: boolean; operators: string[] }
  | { field: string; type: FieldType; source: 'event'; eventNames: string[]; operators: string[] };

/** Events sampled per name, and context keys returned at most. */
const SAMPLE = 200;
const MAX_EVENT_FIELDS = 200;

export async function workflowFields(ctx: AppContext, projectId: string, workflowId?: string): Promise<{ fields: WorkflowFieldItem[] }> {
  const db = ctx.database.db;
  const scope = workflowId ? sql`AND w.id = ${(await findWorkflow(db, projectId, workflowId)).id}` : sql``;
  const [fields, names] = await Promise.all([
    fieldsWithTypes(db, projectId),
    db.execute<{ name: string }>(sql`
      SELECT DISTINCT name FROM (
        SELECT w.event_name AS name FROM workflows w WHERE w.project_id = ${projectId} ${scope}
        UNION
        SELECT s.config->>'eventName' FROM workflow_steps s JOIN workflows w ON w.id = s.workflow_id
         WHERE s.project_id = ${projectId} AND s.type = 'WAIT_FOR_EVENT' ${scope}
      ) n WHERE name IS NOT NULL ORDER BY name LIMIT 100`),
  ]);
  const contact: WorkflowFieldItem[] = fields.map((f) => ({
    field: f.field,
    type: f.type,
    source: 'contact',
    isCustom: f.isCustom,
    operators: operatorsFor(f.type),
  }));
  const eventNames = names.rows.map((r) => r.name);
  if (eventNames.length === 0) return { fields: contact };
  // Top-level keys of the sampled events' data, each with the JSON type seen most often.
  const { rows } = await db.execute<{ key: string; type: string; names: string[] }>(sql`
    WITH sampled AS (
      SELECT e.name, e.data FROM unnest(${sql`ARRAY[${sql.join(
        eventNames.map((n) => sql`${n}`),
        sql`, `,
      )}]::text[]`}) AS n(name)
      CROSS JOIN LATERAL (
        SELECT ev.name, ev.data FROM events ev
         WHERE ev.project_id = ${projectId} AND ev.name = n.name AND jsonb_typeof(ev.data) = 'object'
         ORDER BY ev.created_at DESC LIMIT ${SAMPLE}) e
    ), keys AS (
      SELECT s.name, kv.key, jsonb_typeof(kv.value) AS jtype,
             CASE WHEN jsonb_typeof(kv.value) = 'string' AND kv.value #>> '{}' ~ '^\\d{4}-\\d{2}-\\d{2}' THEN 'date' END AS hint
        FROM sampled s CROSS JOIN LATERAL jsonb_each(s.data) kv
       WHERE jsonb_typeof(kv.value) IN ('string', 'number', 'boolean')
    )
    SELECT key,
           mode() WITHIN GROUP (ORDER BY coalesce(hint, jtype)) AS type,
           array_agg(DISTINCT name ORDER BY name) AS names
      FROM keys GROUP BY key ORDER BY key LIMIT ${MAX_EVENT_FIELDS}`);
  const event: WorkflowFieldItem[] = rows.map((r) => {
    const type = (r.type === 'date' || r.type === 'number' || r.type === 'boolean' ? r.type : 'string') as FieldType;
    return { field: `event.${r.key}`, type, source: 'event', eventNames: r.names, operators: operatorsFor(type) };
  });
  return { fields: [...contact, ...event] };
}
