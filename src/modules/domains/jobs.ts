import { Resolver } from 'node:dns/promises';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import type { DomainStatus } from '../../db/schema/domains.ts';
import type { QueueDef } from '../../jobs/boss.ts';
import { checkDomain, domainsToCheck } from './service.ts';

const BATCH = 5000;
const CONCURRENCY = 10;

/**
 * The jobs' resolver: one try of 1 s (the manual check keeps the patient 2 s x 2 of ctx.dns). A
 * domain whose DNS never answers then costs the run ~1 s of one of its CONCURRENCY workers, not 4 s.
 */
export const JOB_DNS_TIMEOUT_MS = 1000;
const JOB_DNS_TRIES = 1;

function jobResolver(ctx: AppContext): Resolver {
  const resolver = new Resolver({ timeout: JOB_DNS_TIMEOUT_MS, tries: JOB_DNS_TRIES });
  resolver.setServers(ctx.dns.getServers());
  return resolver;
}

/** Pending runs start every 5 minutes: a run stops starting checks after 4, the rest go first next run. */
export const PENDING_RUN_BUDGET_MS = 4 * 60_000;
/** The daily run of verified domains expires after an hour. */
export const VERIFIED_RUN_BUDGET_MS = 45 * 60_000;

export type CheckRun = { checked: number; selected: number };

/**
 * Checks up to BATCH domains in `status` (in turns across projects, see domainsToCheck), CONCURRENCY
 * at a time, starting no check after `budgetMs`; one failure does not stop the rest.
 */
export async function checkDomainsWithStatus(ctx: AppContext, status: DomainStatus, budgetMs = PENDING_RUN_BUDGET_MS): Promise<CheckRun> {
  const deadline = performance.now() + budgetMs;
  const rows = await domainsToCheck(ctx, status, BATCH);
  const resolver = jobResolver(ctx);
  let next = 0;
  const worker = async () => {
    while (next < rows.length && performance.now() < deadline) {
      const row = rows[next++];
      await checkDomain(ctx, row, resolver).catch((err) => ctx.log.warn({ err, domainId: row.id }, 'domain check failed'));
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, rows.length) }, worker));
  if (next < rows.length)
    ctx.log.warn({ status, checked: next, selected: rows.length, budgetMs }, 'domain check run ran out of time; the rest go first next run');
  return { checked: next, selected: rows.length };
}

const empty = z.object({}).passthrough();

/** Every 5 minutes: pending domains whose records may have appeared. */
export const verifyPendingDomainsQueue: QueueDef<z.infer<typeof empty>> = {
  name: 'domains-verify-pending',
  schema: empty,
  cron: '*/5 * * * *',
  retryLimit: 1,
  expireInSeconds: 15 * 60,
  handler: async (ctx) => {
    await checkDomainsWithStatus(ctx, 'pending', PENDING_RUN_BUDGET_MS);
  },
};

/** Daily: verified domains, which go back to pending when their DKIM record is gone. */
export const recheckVerifiedDomainsQueue: QueueDef<z.infer<typeof empty>> = {
  name: 'domains-recheck-verified',
  schema: empty,
  cron: '17 3 * * *',
  retryLimit: 1,
  expireInSeconds: 60 * 60,
  handler: async (ctx) => {
    await checkDomainsWithStatus(ctx, 'verified', VERIFIED_RUN_BUDGET_MS);
  },
};

export const domainQueues = [verifyPendingDomainsQueue, recheckVerifiedDomainsQueue];
