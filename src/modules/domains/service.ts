import { and, asc, desc, eq, sql } from 'drizzle-orm';
import { lockKey } from '../../db/key-lock.ts';
import type { AppContext } from '../../context.ts';
import { UUID, uuidv7 } from '../../db/ids.ts';
import { type DomainStatus, domains } from '../../db/schema/domains.ts';
import { type Db, withTransaction } from '../../db/client.ts';
import { conflict, limitReached, notFound } from '../../http/errors.ts';
import { DKIM_SELECTOR, encryptPrivateKey, generateDkimKey } from './dkim-keys.ts';
import { recordsFor } from './records.ts';
import { SANDBOX_DOMAIN, sandboxReserved } from './sandbox.ts';
import type { DomainRecord } from './schemas.ts';
import { usage } from '../usage/service.ts';
import { checkRecords } from './verify-dns.ts';

type DomainRow = typeof domains.$inferSelect;

export function toDomainRecord(row: DomainRow): DomainRecord {
  return {
    id: row.id,
    domain: row.domain,
    status: row.status,
    projectId: row.projectId,
    createdAt: row.createdAt.toISOString(),
    verifiedAt: row.verifiedAt?.toISOString() ?? null,
    lastCheckedAt: row.lastCheckedAt?.toISOString() ?? null,
    records: row.records,
  };
}

async function findDomain(ctx: AppContext, projectId: string, id: string): Promise<DomainRow> {
  const [row] = UUID.test(id)
    ? await ctx.database.db
        .select()
        .from(domains)
        .where(and(eq(domains.id, id), eq(domains.projectId, projectId)))
    : [];
  if (!row) throw notFound('domain', id);
  return row;
}

const alreadyAdded = (domain: string) => conflict(`Domain ${domain} is already added to this project`, { domain });

/**
 * Domains a project may have. Each one costs an RSA key generation when added, and DNS lookups
 * every 5 minutes while it is pending (the job checks at most 5,000 of all projects' a run): one
 * project with thousands of made-up domains would take every other project's turn.
 */
export const MAX_DOMAINS_PER_PROJECT = 50;

const tooManyDomains = () => limitReached(`A project can have at most ${MAX_DOMAINS_PER_PROJECT} domains; delete one first`, MAX_DOMAINS_PER_PROJECT);

const domainCount = async (db: Db, projectId: string): Promise<number> =>
  (
    await db
      .select({ n: sql<number>`count(*)::int` })
      .from(domains)
      .where(eq(domains.projectId, projectId))
  )[0].n;

export async function addDomain(ctx: AppContext, projectId: string, domain: string): Promise<DomainRecord> {
  if (domain === SANDBOX_DOMAIN || domain.endsWith(`.${SANDBOX_DOMAIN}`)) throw sandboxReserved();
  const exists = await ctx.database.db
    .select({ id: domains.id })
    .from(domains)
    .where(and(eq(domains.projectId, projectId), eq(domains.domain, domain)));
  if (exists.length > 0) throw alreadyAdded(domain);
  if ((await domainCount(ctx.database.db, projectId)) >= MAX_DOMAINS_PER_PROJECT) throw tooManyDomains();
  const key = await generateDkimKey();
  const now = ctx.clock.now();
  const row = await withTransaction(ctx.database, async ({ tx }) => {
    // Counted again under a lock of the project's domains: concurrent adds cannot pass the cap together.
    await lockKey(tx, `domains:${projectId}`);
    if ((await domainCount(tx, projectId)) >= MAX_DOMAINS_PER_PROJECT) throw tooManyDomains();
    const [inserted] = await tx
      .insert(domains)
      .values({
        id: uuidv7(now.getTime()),
        projectId,
        domain,
        status: 'pending',
        dkimSelector: DKIM_SELECTOR,
        dkimPublicKey: key.publicKey,
        dkimPrivateKeyEnc: encryptPrivateKey(key.privateKeyPem, ctx.config.jwtSecret),
        records: recordsFor(domain, key.publicKey, ctx.config),
        createdAt: now,
      })
      .onConflictDoNothing()
      .returning();
    return inserted;
  });
  if (!row) throw alreadyAdded(domain); // added concurrently
  return toDomainRecord(row);
}

export async function listDomains(ctx: AppContext, callerProjectId: string, projectId: string): Promise<DomainRecord[]> {
  // Another project's id answers exactly like a project that does not exist.
  if (projectId !== callerProjectId) throw notFound('project', projectId);
  const rows = await ctx.database.db.select().from(domains).where(eq(domains.projectId, projectId)).orderBy(desc(domains.createdAt), desc(domains.id));
  return rows.map(toDomainRecord);
}

/**
 * Resolves the domain's records now and stores the outcome. A domain is verified when every required
 * record is found; it goes (back) to pending only on a definitive "not there" answer, so a DNS outage
 * does not unverify a domain.
 */
export async function checkDomain(ctx: AppContext, row: DomainRow): Promise<DomainRow> {
  const result = await checkRecords(ctx.dns, row.records);
  let status: DomainStatus = row.status;
  if (result.allRequiredFound) status = 'verified';
  else if (result.requiredMissing) status = 'pending';
  const now = ctx.clock.now();
  const verifiedAt = status === 'verified' ? (row.status === 'verified' && row.verifiedAt ? row.verifiedAt : now) : null;
  const [updated] = await ctx.database.db
    .update(domains)
    .set({ status, verifiedAt, records: result.records, lastCheckedAt: now })
    .where(eq(domains.id, row.id))
    .returning();
  if (updated && status !== row.status) {
    await ctx.keys.notifyChanged(row.projectId);
    ctx.log.info({ domainId: row.id, domain: row.domain, projectId: row.projectId, status }, 'sender domain status changed');
  }
  return updated ?? row; // deleted meanwhile: report what was checked
}

export async function verifyDomainNow(ctx: AppContext, projectId: string, id: string): Promise<DomainRecord> {
  const row = await findDomain(ctx, projectId, id);
  return toDomainRecord(await checkDomain(ctx, row));
}

export async function deleteDomain(ctx: AppContext, projectId: string, id: string): Promise<void> {
  const row = await findDomain(ctx, projectId, id);
  const user = await usage.domainSender(ctx.database.db, projectId, row.domain);
  if (user) {
    throw conflict(`Domain ${row.domain} is used by ${user}; change its sender first`, { domain: row.domain, usedBy: user });
  }
  await ctx.database.db.delete(domains).where(eq(domains.id, row.id));
  await ctx.keys.notifyChanged(projectId);
}

/** Domains in `status` for a background check, least recently checked first. */
export async function domainsToCheck(ctx: AppContext, status: DomainStatus, limit: number): Promise<DomainRow[]> {
  return ctx.database.db
    .select()
    .from(domains)
    .where(eq(domains.status, status))
    .orderBy(sql`${domains.lastCheckedAt} ASC NULLS FIRST`, asc(domains.id))
    .limit(limit);
}
