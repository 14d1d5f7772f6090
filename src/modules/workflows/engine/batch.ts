import type pg from 'pg';
import type { AppContext } from '../../../context.ts';
import type { Db } from '../../../db/client.ts';
import type { FieldType } from '../../../conditions/index.ts';
import { ApiError } from '../../../http/errors.ts';
import { assertWithinBillingLimit, limitExceeded, projectLimits } from '../../billing/limits.ts';
import { customFieldTypes } from '../../contacts/fields.ts';
import type { NewEmail } from '../../emails/queue.ts';
import type { TemplateRecord } from '../../templates/schemas.ts';
import type { NewStepRow } from './advance.ts';

/** What a batch shares: caches of per-project reads, the emails to queue at the end and how many of them each project has. */
export type BatchState = {
  ctx: AppContext;
  /** The batch's transaction; `client` is its raw connection, for pg-boss enqueues. */
  tx: Db;
  client: pg.PoolClient;
  now: Date;
  types: Map<string, Promise<Map<string, FieldType>>>;
  /** Templates by id, read once per batch. */
  templates: Map<string, Promise<TemplateRecord | null>>;
  emails: { email: NewEmail; row: NewStepRow }[];
  /** Per project: whether a monthly `workflows` cap is set, and the emails of this batch counted against it so far. */
  billing: Map<string, { capped: boolean; reserved: number }>;
  /** Contacts with more than one execution in the batch (their steps run one walk after the other). */
  sharedContacts: Set<string>;
  /** Projects' webhook signing secrets, read once per batch. */
  webhookSecrets: Map<string, Promise<string>>;
  /** Per project: milliseconds its CONDITION steps spent in the database in this batch (steps.ts). */
  conditionMs: Map<string, number>;
};

/** A read made once per batch: the first caller's promise, kept in one of the batch's maps. */
export function readOnce<T>(cache: Map<string, Promise<T>>, key: string, read: () => Promise<T>): Promise<T> {
  let p = cache.get(key);
  if (!p) {
    p = read();
    cache.set(key, p);
  }
  return p;
}

/** The project's custom field types, read once per batch. */
export const fieldTypesFor = (b: BatchState, projectId: string): Promise<Map<string, FieldType>> =>
  readOnce(b.types, projectId, () => customFieldTypes(b.tx, projectId));

/**
 * One more email of this batch against the project's monthly `workflows` cap (billing/limits.ts,
 * in the batch's transaction). The batch's emails are written at its end, so the ones it already
 * counted are requested too. Returns why not when the cap is reached; without a cap, one read per
 * project and batch.
 */
export async function countWorkflowEmail(b: BatchState, projectId: string): Promise<string | null> {
  let state = b.billing.get(projectId);
  if (!state) {
    state = { capped: (await projectLimits(b.ctx, b.tx, projectId)).workflows !== null, reserved: 0 };
    b.billing.set(projectId, state);
  }
  if (state.capped) {
    try {
      await assertWithinBillingLimit(b.ctx, { tx: b.tx, client: b.client }, projectId, 'workflows', state.reserved + 1);
    } catch (err) {
      if (err instanceof ApiError && err.code === 'BILLING_LIMIT_EXCEEDED') {
        // Told as this one email against the month's usage, the batch's earlier emails included.
        const d = err.details as { limit: number; usage: number };
        return limitExceeded('workflows', d.limit, d.usage + state.reserved, 1).message;
      }
      throw err;
    }
  }
  state.reserved += 1;
  return null;
}
