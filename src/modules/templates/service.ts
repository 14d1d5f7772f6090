import { type SQL, and, sql, asc, count, desc, eq, ilike, or } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { type Db, withTransaction } from '../../db/client.ts';
import { UUID, uuidv7 } from '../../db/ids.ts';
import { templates } from '../../db/schema/templates.ts';
import { conflict, notFound, validationError } from '../../http/errors.ts';
import { type PageList, pageList } from '../../http/pagination.ts';
import { checkTemplates } from '../../render/engine.ts';
import { fromDomainMatchesSql, senderDomainFor, senderUsageChecks } from '../domains/sender.ts';
import type { CreateTemplateInput, ListTemplatesQuery, TemplateRecord, UpdateTemplateInput } from './schemas.ts';
import { type TemplateUsage, collectTemplateUsage, isUsed } from './usage.ts';

type TemplateRow = typeof templates.$inferSelect;

export function toTemplateRecord(t: TemplateRow): TemplateRecord {
  return {
    id: t.id,
    projectId: t.projectId,
    name: t.name,
    description: t.description,
    subject: t.subject,
    body: t.body,
    from: t.fromEmail,
    fromName: t.fromName,
    replyTo: t.replyTo,
    type: t.type,
    createdAt: t.createdAt.toISOString(),
    updatedAt: t.updatedAt.toISOString(),
  };
}

/** The template, or null when the id is malformed, unknown or of another project. */
export async function findTemplate(db: Db, projectId: string, id: string): Promise<TemplateRecord | null> {
  if (!UUID.test(id)) return null;
  const [row] = await db
    .select()
    .from(templates)
    .where(and(eq(templates.projectId, projectId), eq(templates.id, id)));
  return row ? toTemplateRecord(row) : null;
}

/** The template; 404 TEMPLATE_NOT_FOUND when the id is malformed, unknown or of another project. */
export async function getTemplate(db: Db, projectId: string, id: string): Promise<TemplateRecord> {
  const template = await findTemplate(db, projectId, id);
  if (!template) throw notFound('template', id);
  return template;
}

/** Liquid that does not parse is refused when saved (422), so it never fails at send time. */
function assertTemplatesParse(input: { subject?: string; body?: string }): void {
  const errors = checkTemplates({ subject: input.subject, body: input.body });
  if (errors.length > 0) throw validationError(errors);
}

export async function createTemplate(
  ctx: AppContext,
  projectId: string,
  input: CreateTemplateInput,
): Promise<TemplateRecord> {
  assertTemplatesParse(input);
  await senderDomainFor(ctx, projectId, input.from);
  const now = ctx.clock.now();
  const [row] = await ctx.database.db
    .insert(templates)
    .values({
      id: uuidv7(now.getTime()),
      projectId,
      name: input.name,
      description: input.description ?? null,
      subject: input.subject,
      body: input.body,
      fromEmail: input.from,
      fromName: input.fromName ?? null,
      replyTo: input.replyTo ?? null,
      type: input.type,
      createdAt: now,
      updatedAt: now,
    })
    .returning();
  return toTemplateRecord(row);
}

const SORT_COLUMNS = { name: sql`lower(${templates.name})`, createdAt: templates.createdAt, updatedAt: templates.updatedAt };

const likePattern = (s: string) => `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

export async function listTemplates(
  ctx: AppContext,
  projectId: string,
  q: ListTemplatesQuery,
): Promise<PageList<TemplateRecord>> {
  const conditions: SQL[] = [eq(templates.projectId, projectId)];
  if (q.type) conditions.push(eq(templates.type, q.type));
  if (q.search) {
    const pattern = likePattern(q.search);
    const match = or(ilike(templates.name, pattern), ilike(templates.description, pattern), ilike(templates.subject, pattern));
    if (match) conditions.push(match);
  }
  const where = and(...conditions);
  const order = q.dir === 'asc' ? asc : desc;
  const [rows, [{ total }]] = await Promise.all([
    ctx.database.db
      .select()
      .from(templates)
      .where(where)
      .orderBy(order(SORT_COLUMNS[q.sort]), order(templates.id))
      .limit(q.pageSize)
      .offset((q.page - 1) * q.pageSize),
    ctx.database.db.select({ total: count() }).from(templates).where(where),
  ]);
  return pageList(rows.map(toTemplateRecord), total, q.page, q.pageSize);
}

export async function updateTemplate(
  ctx: AppContext,
  projectId: string,
  id: string,
  input: UpdateTemplateInput,
): Promise<TemplateRecord> {
  const current = await getTemplate(ctx.database.db, projectId, id);
  assertTemplatesParse(input);
  // A sender is checked when it changes: an unrelated edit is not refused because a domain turned pending.
  if (input.from !== undefined && input.from !== current.from) await senderDomainFor(ctx, projectId, input.from);
  const changes: Partial<typeof templates.$inferInsert> = {};
  if (input.name !== undefined) changes.name = input.name;
  if (input.description !== undefined) changes.description = input.description;
  if (input.subject !== undefined) changes.subject = input.subject;
  if (input.body !== undefined) changes.body = input.body;
  if (input.from !== undefined) changes.fromEmail = input.from;
  if (input.fromName !== undefined) changes.fromName = input.fromName;
  if (input.replyTo !== undefined) changes.replyTo = input.replyTo;
  if (input.type !== undefined) changes.type = input.type;
  if (Object.keys(changes).length === 0) return current;
  const [row] = await ctx.database.db
    .update(templates)
    .set({ ...changes, updatedAt: ctx.clock.now() })
    .where(and(eq(templates.projectId, projectId), eq(templates.id, id)))
    .returning();
  if (!row) throw notFound('template', id);
  return toTemplateRecord(row);
}

/** A copy named "<name> (copy)" with a new id and fresh timestamps. */
export async function duplicateTemplate(ctx: AppContext, projectId: string, id: string): Promise<TemplateRecord> {
  const source = await getTemplate(ctx.database.db, projectId, id);
  const now = ctx.clock.now();
  const [row] = await ctx.database.db
    .insert(templates)
    .values({
      id: uuidv7(now.getTime()),
      projectId,
      name: `${source.name} (copy)`,
      description: source.description,
      subject: source.subject,
      body: source.body,
      fromEmail: source.from,
      fromName: source.fromName,
      replyTo: source.replyTo,
      type: source.type,
      createdAt: now,
      updatedAt: now,
    })
    .returning();
  return toTemplateRecord(row);
}

export async function templateUsage(ctx: AppContext, projectId: string, id: string): Promise<TemplateUsage> {
  await getTemplate(ctx.database.db, projectId, id);
  return collectTemplateUsage(ctx.database.db, projectId, id);
}

/** Deletes the template; 409 while a campaign or workflow step references it. */
export async function deleteTemplate(ctx: AppContext, projectId: string, id: string): Promise<void> {
  if (!UUID.test(id)) throw notFound('template', id);
  await withTransaction(ctx.database, async ({ tx }) => {
    const [row] = await tx
      .select({ id: templates.id, name: templates.name })
      .from(templates)
      .where(and(eq(templates.projectId, projectId), eq(templates.id, id)))
      .for('update');
    if (!row) throw notFound('template', id);
    const usage = await collectTemplateUsage(tx, projectId, id);
    if (isUsed(usage)) {
      const where = [
        ...usage.campaigns.map((c) => `campaign "${c.name}"`),
        ...usage.workflows.map((w) => `workflow "${w.name}"`),
      ];
      throw conflict(`Template "${row.name}" is used by ${where.join(', ')}`, { ...usage });
    }
    await tx.delete(templates).where(eq(templates.id, id));
  });
}

/** Domain DELETE is refused while a template sends from the domain or a subdomain of it. */
async function templateUsingDomain(db: Db, projectId: string, domain: string): Promise<string | null> {
  const [row] = await db
    .select({ name: templates.name })
    .from(templates)
    .where(and(eq(templates.projectId, projectId), fromDomainMatchesSql(templates.fromEmail, domain)))
    .orderBy(asc(templates.createdAt))
    .limit(1);
  return row ? `template "${row.name}"` : null;
}

senderUsageChecks.push(templateUsingDomain);
