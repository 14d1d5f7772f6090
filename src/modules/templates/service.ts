import { type SQL, and, sql, asc, desc, eq, ilike, or } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { type Db, withTransaction } from '../../db/client.ts';
import { UUID, uuidv7 } from '../../db/ids.ts';
import { templates } from '../../db/schema/templates.ts';
import { conflict, notFound } from '../../http/errors.ts';
import { type PageList, pageList } from '../../http/pagination.ts';
import { senderDomainFor } from '../domains/sender.ts';
import { type TemplateUsers, usage } from '../usage/service.ts';
import type { CreateTemplateInput, ListTemplatesQuery, TemplateRecord, UpdateTemplateInput } from './schemas.ts';
import { containsPattern } from '../../db/like.ts';
import { numberedPage } from '../../db/page-budget.ts';
import { assertTemplatesParse, messageContentValues } from './message-content.ts';

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

export async function createTemplate(ctx: AppContext, projectId: string, input: CreateTemplateInput): Promise<TemplateRecord> {
  await assertTemplatesParse(ctx, input);
  await senderDomainFor(ctx, projectId, input.from);
  const now = ctx.clock.now();
  const [row] = await ctx.database.db
    .insert(templates)
    .values({
      id: uuidv7(now.getTime()),
      projectId,
      ...messageContentValues(input),
      createdAt: now,
      updatedAt: now,
    })
    .returning();
  return toTemplateRecord(row);
}

const SORT_COLUMNS = { name: sql`lower(${templates.name})`, createdAt: templates.createdAt, updatedAt: templates.updatedAt };

/** A template's size in a list page (db/page-budget.ts): its body (up to 1 MB) and subject. */
const TEMPLATE_BYTES = sql<number>`octet_length(${templates.body}) + octet_length(${templates.subject})`.mapWith(Number);

export async function listTemplates(ctx: AppContext, projectId: string, q: ListTemplatesQuery): Promise<PageList<TemplateRecord>> {
  const conditions: SQL[] = [eq(templates.projectId, projectId)];
  if (q.type) conditions.push(eq(templates.type, q.type));
  if (q.search) {
    const pattern = containsPattern(q.search);
    const match = or(ilike(templates.name, pattern), ilike(templates.description, pattern), ilike(templates.subject, pattern));
    if (match) conditions.push(match);
  }
  const where = and(...conditions);
  const order = q.dir === 'asc' ? asc : desc;
  const sort = [order(SORT_COLUMNS[q.sort]), order(templates.id)];
  const page = { project: templates.projectId, where, sort, bytes: TEMPLATE_BYTES, page: q.page, pageSize: q.pageSize, what: 'templates' };
  const { rows, total } = await numberedPage(ctx, projectId, templates, page);
  return pageList(rows.map(toTemplateRecord), total, q.page, q.pageSize);
}

export async function updateTemplate(ctx: AppContext, projectId: string, id: string, input: UpdateTemplateInput): Promise<TemplateRecord> {
  const current = await getTemplate(ctx.database.db, projectId, id);
  await assertTemplatesParse(ctx, input);
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

export async function templateUsage(ctx: AppContext, projectId: string, id: string): Promise<TemplateUsers> {
  await getTemplate(ctx.database.db, projectId, id);
  return usage.templateUsers(ctx.database.db, projectId, id);
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
    const users = await usage.templateUsers(tx, projectId, id);
    if (users.campaigns.length + users.workflows.length > 0) {
      const where = [...users.campaigns.map((c) => `campaign "${c.name}"`), ...users.workflows.map((w) => `workflow "${w.name}"`)];
      throw conflict(`Template "${row.name}" is used by ${where.join(', ')}`, { ...users });
    }
    await tx.delete(templates).where(eq(templates.id, id));
  });
}
