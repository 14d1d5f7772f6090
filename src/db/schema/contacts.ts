import { sql } from 'drizzle-orm';
import { bigint, boolean, index, integer, jsonb, pgTable, primaryKey, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { projects } from './users.ts';

export const contacts = pgTable(
  'contacts',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    email: text('email').notNull(),
    subscribed: boolean('subscribed').notNull(),
    snoozedUntil: timestamp('snoozed_until', { withTimezone: true, mode: 'date' }),
    data: jsonb('data')
      .$type<Record<string, unknown>>()
      .notNull()
      .default(sql`'{}'::jsonb`),
    /**
     * `octet_length(data::text)`, kept by the `contacts_data_bytes` trigger (migration 0016) so a
     * list can stop a page at a byte budget without printing every contact's data. NULL for rows
     * written before it: readers fall back to computing it.
     */
    dataBytes: integer('data_bytes'),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [uniqueIndex('contacts_project_email_key').on(t.projectId, t.email), index('contacts_project_created_idx').on(t.projectId, t.createdAt, t.id)],
);

/** The type of each custom field, fixed the first time a non-null value is seen in the project. */
export const contactFields = pgTable(
  'contact_fields',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    key: text('key').notNull(),
    type: text('type').$type<'string' | 'number' | 'boolean' | 'date'>().notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.key] })],
);

/**
 * The exact number of contacts per project and subscription, for the `total` of GET /contacts
 * (unfiltered or by `subscribed`; a count of the contacts grows with the project). Kept by
 * statement-level triggers on `contacts` defined in migration 0021 (every insert, subscription
 * change and delete, cascades and resets included). A row per writing backend (`shard` = its pid;
 * 0 = folded), as email_counts: counter writes never wait. db/counter-rows.ts folds exited backends' rows.
 */
export const contactCounts = pgTable(
  'contact_counts',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    subscribed: boolean('subscribed').notNull(),
    shard: integer('shard').notNull(),
    /** Per shard; may be negative (the sum over the shards is the count). */
    count: bigint('count', { mode: 'number' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.subscribed, t.shard] })],
);
