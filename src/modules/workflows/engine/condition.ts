import type { Db } from '../../../db/client.ts';
import { type Condition, type FieldType, contactMatches, evaluateCondition } from '../../../conditions/index.ts';
import { forEachFilter } from '../../../conditions/index.ts';
import { CONTEXT_DATA_KEY, conditionForEvaluation } from '../step-config.ts';

/**
 * A CONDITION step's answer for one contact and execution context. `event.<key>` filters with value
 * operators read the context (step-config.ts renames them to `data.__ctx__.<key>`). Conditions on
 * contact fields and the context are evaluated in memory (the operator table's evaluator); those
 * naming tracked activity or segments ask PostgreSQL, with the context filters decided in memory first.
 */

export type ConditionContact = { id: string; email: string; subscribed: boolean; data: Record<string, unknown>; createdAt: string; updatedAt: string };

const inMemoryOnly = (c: Condition): boolean => {
  let ok = true;
  forEachFilter(c, (f) => {
    const prefix = f.field.split('.')[0];
    if (prefix === 'event' || prefix === 'email' || prefix === 'segment') ok = false;
  });
  return ok;
};

const ALWAYS = { field: 'email', operator: 'exists' };
const NEVER = { field: 'email', operator: 'notExists' };

/**
 * Whether the condition holds for the contact, or what `ask` answered instead: the tree's database
 * part, when it has one, is read through `ask`, which may bound it in time (steps.ts).
 */
export async function conditionHolds<A>(
  db: Db,
  projectId: string,
  stored: Condition,
  contact: ConditionContact,
  context: Record<string, unknown>,
  opts: { types: ReadonlyMap<string, FieldType>; now: Date },
  ask: (read: () => Promise<boolean>) => Promise<boolean | A>,
): Promise<boolean | A> {
  const c = conditionForEvaluation(stored);
  const withContext = { ...contact, data: { ...contact.data, [CONTEXT_DATA_KEY]: context } };
  if (inMemoryOnly(c)) {
    return evaluateCondition(c, withContext, { events: [], emails: [], memberOf: () => false }, opts);
  }
  // Decide the context filters here; the rest of the tree goes to SQL unchanged.
  const contextField = `data.${CONTEXT_DATA_KEY}.`;
  const decide = (node: Condition): Condition => ({
    logic: node.logic,
    groups: node.groups.map((g) => ({
      filters: g.filters.map((f) => {
        if (!f.field.startsWith(contextField)) return f;
        const single: Condition = { logic: 'AND', groups: [{ filters: [f] }] };
        const holds = evaluateCondition(single, withContext, { events: [], emails: [], memberOf: () => false }, opts);
        return holds ? ALWAYS : NEVER;
      }),
      ...(g.conditions ? { conditions: decide(g.conditions) } : {}),
    })),
  });
  const decided = decide(c);
  return ask(() => contactMatches(db, projectId, contact.id, decided, opts));
}
