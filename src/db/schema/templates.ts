import { sql } from 'drizzle-orm';
import { index, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { projects } from './users.ts';

export type TemplateType = 'TRANSACTIONAL' | 'MARKETING' | 'HEADLESS';

/** Reusable email content: Liquid subject and HTML body, sender, and message type. */
export const templates = pgTable(
  'templates',
  {
    id: uuid('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    description: text('description'),
    subject: text('subject').notNull(),
    body: text('body').notNull(),
    fromEmail: text('from_email').notNull(),
    fromName: text('from_name'),
    replyTo: text('reply_to'),
    type: text('type').$type<TemplateType>().notNull().default('MARKETING'),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [
    index('templates_project_created_idx').on(t.projectId, t.createdAt, t.id),
    index('templates_project_updated_idx').on(t.projectId, t.updatedAt, t.id),
    // Name sort is case-insensitive ("alpha, Beta, gamma" whatever the database collation).
    index('templates_project_lower_name_idx').on(t.projectId, sql`lower(${t.name})`, t.id),
  ],
);
