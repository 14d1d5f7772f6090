import { sql } from 'drizzle-orm';
import { index, pgTable, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { projects, users } from './users.ts';

/**
 * An invitation to join a project, for an address without an account (or not yet signed in).
 * The emailed link carries a signed token naming this row; accepting sets `acceptedAt` in the same
 * statement that checks it is unset and unexpired, so a link works once. Revoking deletes the row.
 */
export const invitations = pgTable(
  'project_invitations',
  {
    id: uuid('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    email: text('email').notNull(),
    role: text('role').$type<'ADMIN' | 'MEMBER'>().notNull(),
    invitedBy: text('invited_by').references(() => users.id, { onDelete: 'set null' }),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }).notNull(),
    acceptedAt: timestamp('accepted_at', { withTimezone: true, mode: 'date' }),
    acceptedBy: text('accepted_by').references(() => users.id, { onDelete: 'set null' }),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [
    // One pending invitation per address and project: inviting again replaces it.
    uniqueIndex('project_invitations_pending_key')
      .on(t.projectId, t.email)
      .where(sql`accepted_at IS NULL`),
    index('project_invitations_project_idx').on(t.projectId, t.createdAt),
  ],
);
