import { index, jsonb, pgTable, text, timestamp } from 'drizzle-orm/pg-core';
import { contacts } from './contacts.ts';
import { projects } from './users.ts';

/** Tracked events and the events the service emits (contact.subscribed, email.*, segment.*). */
export const events = pgTable(
  'events',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    contactId: text('contact_id').references(() => contacts.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    data: jsonb('data').$type<Record<string, unknown>>(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [
    index('events_project_created_idx').on(t.projectId, t.createdAt, t.id),
    index('events_project_name_created_idx').on(t.projectId, t.name, t.createdAt),
    index('events_contact_name_created_idx').on(t.contactId, t.name, t.createdAt),
    // A contact's timeline (GET /events/contact/:id, /activity?contactId=), newest first.
    index('events_contact_created_idx').on(t.contactId, t.createdAt, t.id),
  ],
);
