import { boolean, index, integer, jsonb, pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { contacts } from './contacts.ts';
import { projects } from './users.ts';

export type SegmentType = 'DYNAMIC' | 'STATIC';

/** A segment: a condition over contacts (DYNAMIC) or a managed list of contacts (STATIC). */
export const segments = pgTable(
  'segments',
  {
    id: uuid('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    description: text('description'),
    type: text('type').$type<SegmentType>().notNull(),
    /** The condition tree as accepted (DYNAMIC only). */
    condition: jsonb('condition').$type<unknown>(),
    /** `octet_length(condition::text)`, written with the condition (GET /segments' batches); NULL on rows older than it. */
    conditionBytes: integer('condition_bytes'),
    trackMembership: boolean('track_membership').notNull().default(false),
    /** Cached count: refreshed by refresh, by segment writes, by compute and every 5 minutes. */
    memberCount: integer('member_count').notNull().default(0),
    memberCountAt: timestamp('member_count_at', { withTimezone: true, mode: 'date' }),
    /**
     * A tracked segment's compute that stopped at its time budget: the last contact it brought in
     * line, in (created_at, id) order; the next compute goes on after it. NULL when the last one
     * finished (or the condition or tracking changed since).
     */
    computeCursor: jsonb('compute_cursor').$type<{ at: string; id: string }>(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [index('segments_project_created_idx').on(t.projectId, t.createdAt, t.id)],
);

/**
 * Contacts in a segment. For a STATIC segment this is its member list; for a DYNAMIC segment with
 * `trackMembership` it is the membership as last computed, which entry/exit events are diffed from.
 */
export const segmentMembers = pgTable(
  'segment_members',
  {
    segmentId: uuid('segment_id')
      .notNull()
      .references(() => segments.id, { onDelete: 'cascade' }),
    contactId: text('contact_id')
      .notNull()
      .references(() => contacts.id, { onDelete: 'cascade' }),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.segmentId, t.contactId] }), index('segment_members_contact_idx').on(t.contactId)],
);
