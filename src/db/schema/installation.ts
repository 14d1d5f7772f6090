import { check, integer, pgTable, text, timestamp } from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';

/**
 * One row per installation: an HMAC of JWT_SECRET (never the secret), written by the first process
 * whose secret is known good, so every later process, and GET /health, can tell whether it runs
 * with the installation's secret even before any DKIM key exists (src/modules/system/secret-check.ts).
 */
export const installation = pgTable(
  'installation',
  {
    id: integer('id').primaryKey().default(1),
    secretCheck: text('secret_check').notNull(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [check('installation_single_row', sql`${t.id} = 1`)],
);
