import { index, integer, pgTable, text, timestamp } from 'drizzle-orm/pg-core';
import { projects } from './users.ts';

/**
 * An uploaded image (modules/uploads): what the project's quota counts, its list shows and its
 * delete removes. `key` is the storage key `<projectId>/<uuidv7>.<ext>`.
 */
export const uploads = pgTable(
  'uploads',
  {
    key: text('key').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    /** Bytes. */
    size: integer('size').notNull(),
    contentType: text('content_type').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  // The list reads it backwards (newest first); the quota sums a project's rows through it.
  (t) => [index('uploads_project_created_idx').on(t.projectId, t.createdAt, t.key)],
);
