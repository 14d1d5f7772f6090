import { type SQL, sql } from 'drizzle-orm';
import { z } from 'zod';

/**
 * A delivery job names up to DELIVERY_JOB_EMAILS emails: a campaign batch of 1,000 emails is 10 job
 * rows, not 1,000, and a fetch takes jobs until they hold a delivery batch's worth of emails (the
 * queue's `jobWeight`). A job only says "deliver these"; the claim on each email (lifecycle.ts) is
 * what makes delivery happen once, so a job run twice, or two jobs naming one email, send it once.
 */
export const DELIVERY_JOB_EMAILS = 100;

const emailIds = z.array(z.string().uuid()).min(1).max(DELIVERY_JOB_EMAILS);
const slot = z.string().datetime().optional();

/** `slot`: the send slot reserved for the job's emails (a throttled email waits for it in the queue). */
export const deliveryPayload = z.union([
  z.object({ emailIds, slot }),
  // One email a job, as queued before jobs named several (jobs still queued at an upgrade).
  z.object({ emailId: z.string().uuid(), slot }).transform(({ emailId, slot }) => ({ emailIds: [emailId], slot })),
]);
export type DeliveryPayload = { emailIds: string[]; slot?: string };

/** The jobs that deliver these emails, DELIVERY_JOB_EMAILS a job. */
export function deliveryJobs(ids: string[]): { data: DeliveryPayload }[] {
  const jobs: { data: DeliveryPayload }[] = [];
  for (let i = 0; i < ids.length; i += DELIVERY_JOB_EMAILS) jobs.push({ data: { emailIds: ids.slice(i, i + DELIVERY_JOB_EMAILS) } });
  return jobs;
}

/**
 * SQL over `data` (a delivery job's payload): how many emails the job names. A payload of another
 * shape counts as one rather than failing the fetch (its job then fails alone, as not valid).
 */
export const DELIVERY_JOB_WEIGHT = `CASE WHEN jsonb_typeof(data->'emailIds') = 'array' THEN jsonb_array_length(data->'emailIds') ELSE 1 END`;

/** SQL: the delivery job payload `data` names the email `id` (text). */
export const deliveryJobNames = (data: SQL, id: SQL): SQL => sql`(${data}->'emailIds' ? ${id} OR ${data}->>'emailId' = ${id})`;
