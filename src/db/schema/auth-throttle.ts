import { index, integer, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/** Attempt counters of the auth routes, per IP or per account, shared by every API process. */
export const authThrottle = pgTable(
  'auth_throttle',
  {
    key: text('key').primaryKey(),
    count: integer('count').notNull(),
    windowStart: timestamp('window_start', { withTimezone: true, mode: 'date' }).notNull(),
    lockedUntil: timestamp('locked_until', { withTimezone: true, mode: 'date' }),
  },
  (t) => [index('auth_throttle_window_idx').on(t.windowStart)],
);
