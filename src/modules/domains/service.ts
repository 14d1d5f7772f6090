import type { Resolver } from 'node:dns/promises';
import { and, desc, eq, sql } from 'drizzle-orm';
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

const isAdded = async (db: Db, projectId: string, domain: string): Promise<boolean> =>
  (
    await db
      .select({ id: domains.id })
      .from(domains)
      .where(and(eq(domains.projectId, projectId), eq(domains.domain, domain)))
  ).length > 0;

export async function addDomain(ctx: AppContext, projectId: string, domain: string): Promise<DomainRecord> {
  if (domain === SANDBOX_DOMAIN || domain.endsWith(`.${SANDBOX_DOMAIN}`)) throw sandboxReserved();
  if (await isAdded(ctx.database.db, projectId, domain)) throw alreadyAdded(domain);
  // Answered before taking a turn, so a project at its cap costs no key and no turn.
  if ((await domainCount(ctx.database.db, projectId)) >= MAX_DOMAINS_PER_PROJECT) throw tooManyDomains();
  const row = await ctx.dkimKeyTurns.run(projectId, () =>
    withTransaction(ctx.database, async ({ tx }) => {
      // Counted again under a lock of the project's domains, and only then is the key generated:
      // concurrent adds (in any process) can neither pass the cap together nor spend keys past it.
      await lockKey(tx, `domains:${projectId}`);
      if (await isAdded(tx, projectId, domain)) throw alreadyAdded(domain);
      if ((await domainCount(tx, projectId)) >= MAX_DOMAINS_PER_PROJECT) throw tooManyDomains();
      const key = await generateDkimKey();
      const now = ctx.clock.now();
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
    }),
  );
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
 * does not unverify a domain. The background jobs pass their own, less patient `resolver`.
 */
export async function checkDomain(ctx: AppContext, row: DomainRow, resolver: Resolver = ctx.dns): Promise<DomainRow> {
  const result = await checkRecords(resolver, row.records);
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

/**
 * Domains in `status` for a background check, in turns across projects: every project's least
 * recently checked domain, then every project's second, and so on (least recently checked first
 * within a turn). One project's domains whose DNS never answers cannot push another's to the end.
 */
export async function domainsToCheck(ctx: AppContext, status: DomainStatus, limit: number): Promise<DomainRow[]> {
  const db = ctx.database.db;
  const ranked = db
    .select({
      id: domains.id,
      lastCheckedAt: domains.lastCheckedAt,
      turn: sql<number>`row_number() over (partition by ${domains.projectId} order by ${domains.lastCheckedAt} asc nulls first, ${domains.id})`.as('turn'),
    })
    .from(domains)
    .where(eq(domains.status, status))
    .as('ranked');
  const rows = await db
    .select({ domain: domains })
    .from(ranked)
    .innerJoin(domains, eq(domains.id, ranked.id))
    .orderBy(ranked.turn, sql`${ranked.lastCheckedAt} asc nulls first`, ranked.id)
    .limit(limit);
  return rows.map((r) => r.domain);
}
