import { index, integer, jsonb, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';
import { projects } from './users.ts';

/** Idempotency keys of /v1/send and /v1/track, claimed before the handler runs (http/idempotency.ts). */
export const idempotencyKeys = pgTable(
  'idempotency_keys',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    /**
     * Whose key space: `secret` (/v1/send) or `public` (/v1/track). The public key ships in web
     * pages, so whoever holds it must not claim, or read the outcome of, a secret-key request's key.
     */
    keyType: text('key_type').$type<'secret' | 'public'>().notNull().default('secret'),
    key: text('key').notNull(),
    method: text('method').notNull(),
    path: text('path').notNull(),
    statusCode: integer('status_code'),
    response: jsonb('response'),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.keyType, t.key] }), index('idempotency_keys_expires_idx').on(t.expiresAt)],
);
