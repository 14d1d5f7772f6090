import { index, pgTable, text, timestamp } from 'drizzle-orm/pg-core';
import { users } from './users.ts';

/** Dashboard sessions: the cookie names one row; deleting the row ends the session everywhere at once. */
export const sessions = pgTable(
  'sessions',
  {
    id: text('id').primaryKey(),
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [index('sessions_user_idx').on(t.userId, t.createdAt)],
);
