import { sql } from 'drizzle-orm';
import { bigint, date, index, integer, jsonb, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';
import { contacts } from './contacts.ts';
import { projects } from './users.ts';

/**
 * Tracked events and the events the service emits (contact.subscribed, email.*, segment.*).
 * Partitioned by month on created_at (PARTITION BY RANGE), which Drizzle cannot declare: migration
 * 0007 makes the table partitioned, events/partitions.ts creates months ahead and drops expired ones.
 * So the primary key carries created_at (a partitioned table's unique keys include its partition key);
 * nothing looks an event up by id alone or references it.
 *
 * No foreign keys (migration 0025): their checks were about 40 % of an event insert's time in
 * PostgreSQL, and the contact's locked its row for every event. What they did is done where rows
 * go: a contact's delete deletes its events (contacts/deleted.ts, which also keeps a
 * tombstone for an event written at the same moment), a project's purge its events
 * (projects/purge.ts).
 */
export const events = pgTable(
  'events',
  {
    id: text('id').notNull(),
    projectId: text('project_id').notNull(),
    contactId: text('contact_id'),
    name: text('name').notNull(),
    data: jsonb('data').$type<Record<string, unknown>>(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.id, t.createdAt] }),
    index('events_project_created_idx').on(t.projectId, t.createdAt, t.id),
    index('events_project_name_created_idx').on(t.projectId, t.name, t.createdAt),
    index('events_contact_name_created_idx').on(t.contactId, t.name, t.createdAt),
    // A contact's timeline (GET /events/contact/:id, /activity?contactId=), newest first.
    index('events_contact_created_idx').on(t.contactId, t.createdAt, t.id),
    // Analytics: clicks per link of one campaign.
    index('events_campaign_clicks_idx')
      .on(sql`(${t.data}->>'campaignId')`, sql`(${t.data}->>'link')`)
      .where(sql`name = 'email.clicked'`),
  ],
);

/**
 * Analytics rollups of tracked (custom) events, written in the same statement as the events
 * (events/record.ts) so GET /analytics/top-events reads whole days without scanning the events.
 * Tracked events per project, name and UTC day, a row per writing backend as email_counts (so that
 * concurrent tracking of one name never queues on one row); contact deletions subtract their events
 * (contacts/service.ts), deleting an event name deletes its rows (events/usage.ts).
 */
export const eventNameDays = pgTable(
  'event_name_days',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    day: date('day', { mode: 'string' }).notNull(),
    /** The writer's backend pid (0 = folded, db/counter-rows.ts): no two live transactions write one row. */
    shard: integer('shard').notNull(),
    /** Per shard; may be negative after deletions (the sum over the shards is the count). */
    count: integer('count').notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.name, t.day, t.shard] })],
);

/**
 * Each contact's first and last tracked event of each name: a contact whose first or last event is
 * in a range did the event in it; only one whose events straddle the range needs the events table.
 * Deleted with the contact.
 */
export const eventNameContacts = pgTable(
  'event_name_contacts',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    contactId: text('contact_id')
      .notNull()
      .references(() => contacts.id, { onDelete: 'cascade' }),
    firstAt: timestamp('first_at', { withTimezone: true, mode: 'date' }).notNull(),
    lastAt: timestamp('last_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.name, t.contactId] }), index('event_name_contacts_contact_idx').on(t.contactId)],
);

/**
 * The exact number of events per project and name, for the `total` of GET /events (a count of the
 * events themselves grows with the table). Kept by statement-level triggers on `events` defined in
 * migration 0009 (every insert, delete and update, cascades included); dropping a partition fires no
 * trigger, so events/partitions.ts subtracts the partition's rows before dropping it. A row per
 * writing backend (`shard` = its pid; 0 = folded, db/counter-rows.ts), as email_counts: counter
 * writes never wait, and cannot deadlock (migration 0020).
 */
export const eventCounts = pgTable(
  'event_counts',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    shard: integer('shard').notNull(),
    /** Per shard; may be negative after deletions (the sum over the shards is the count). */
    count: bigint('count', { mode: 'number' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.name, t.shard] })],
);

/**
 * The exact number of events per project, name and UTC day, for counts over a time range
 * (GET /activity/stats, a ranged /activity's `total`, /activity/recent-count): whole days are read
 * here, only a range's partial first and last days from the events (events/day-counts.ts). Kept by
 * the same statement-level triggers as event_counts (migration 0012); dropping a partition deletes
 * the rows of its month (events/counts.ts forgetPartition). A row per writing backend, as event_counts.
 */
export const eventDayCounts = pgTable(
  'event_day_counts',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    day: date('day', { mode: 'string' }).notNull(),
    shard: integer('shard').notNull(),
    /** Per shard; may be negative after deletions (the sum over the shards is the count). */
    count: bigint('count', { mode: 'number' }).notNull(),
  },
  // Day first: a range is read across every name of its days.
  (t) => [primaryKey({ columns: [t.projectId, t.day, t.name, t.shard] })],
);

/**
 * Contacts deleted lately (contacts/deleted.ts): their events are deleted and their emails left
 * without a contact with them, and again by storage maintenance once they are a minute old, for a
 * row a transaction wrote for the contact as it was deleted (nothing locks a contact for its events
 * or emails since migrations 0025 and 0026).
 */
export const deletedContacts = pgTable(
  'deleted_contacts',
  {
    contactId: text('contact_id').primaryKey(),
    projectId: text('project_id').notNull(),
    deletedAt: timestamp('deleted_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [index('deleted_contacts_deleted_at_idx').on(t.deletedAt)],
);
