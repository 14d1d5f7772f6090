import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import type { DomainStatus } from '../../db/schema/domains.ts';
import type { QueueDef } from '../../jobs/boss.ts';
import { checkDomain, domainsToCheck } from './service.ts';

const BATCH = 5000;
const CONCURRENCY = 10;

/** Checks up to BATCH domains in `status`, CONCURRENCY at a time; one failure does not stop the rest. */
export async function checkDomainsWithStatus(ctx: AppContext, status: DomainStatus): Promise<void> {
  const rows = await domainsToCheck(ctx, status, BATCH);
  let next = 0;
  const worker = async () => {
    while (next < rows.length) {
      const row = rows[next++];
      await checkDomain(ctx, row).catch((err) => ctx.log.warn({ err, domainId: row.id }, 'domain check failed'));
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, rows.length) }, worker));
}

const empty = z.object({}).passthrough();

/** Every 5 minutes: pending domains whose records may have appeared. */
export const verifyPendingDomainsQueue: QueueDef<z.infer<typeof empty>> = {
  name: 'domains-verify-pending',
  schema: empty,
  cron: '*/5 * * * *',
  retryLimit: 1,
  expireInSeconds: 15 * 60,
  handler: (ctx) => checkDomainsWithStatus(ctx, 'pending'),
};

/** Daily: verified domains, which go back to pending when their DKIM record is gone. */
export const recheckVerifiedDomainsQueue: QueueDef<z.infer<typeof empty>> = {
  name: 'domains-recheck-verified',
  schema: empty,
  cron: '17 3 * * *',
  retryLimit: 1,
  expireInSeconds: 60 * 60,
  handler: (ctx) => checkDomainsWithStatus(ctx, 'verified'),
};

export const domainQueues = [verifyPendingDomainsQueue, recheckVerifiedDomainsQueue];
