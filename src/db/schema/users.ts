import { boolean, index, pgTable, primaryKey, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

/** A member's role in a project (decisions.md § 2). */
export type Role = 'OWNER' | 'ADMIN' | 'MEMBER';

export const users = pgTable(
  'users',
  {
    id: text('id').primaryKey(),
    email: text('email').notNull(),
    passwordHash: text('password_hash').notNull(),
    emailVerifiedAt: timestamp('email_verified_at', { withTimezone: true, mode: 'date' }),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [uniqueIndex('users_email_key').on(t.email)],
);

export const projects = pgTable(
  'projects',
  {
    id: text('id').primaryKey(),
    name: text('name').notNull(),
    publicKey: text('public_key').notNull(),
    /** Legacy: the secret key in clear, emptied at start-up by hashLegacySecretKeys (src/http/api-keys.ts). */
    secretKey: text('secret_key'),
    /** HMAC-SHA256 of the secret key (src/http/api-keys.ts); the key itself is never stored. */
    secretKeyHash: text('secret_key_hash'),
    /** `sk_` and the key's first 8 characters, shown in place of the key. */
    secretKeyPrefix: text('secret_key_prefix'),
    disabled: boolean('disabled').notNull().default(false),
    disabledReason: text('disabled_reason'),
    tracking: text('tracking').notNull().default('ENABLED'),
    language: text('language').notNull().default('en'),
    /** IANA time zone for analytics buckets. */
    timezone: text('timezone').notNull().default('UTC'),
    /** Postal address printed in the footer of MARKETING mail (bulk-mail rules in the US and EU ask for one); null: none. */
    postalAddress: text('postal_address'),
    webhookSecret: text('webhook_secret').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex('projects_public_key_key').on(t.publicKey),
    uniqueIndex('projects_secret_key_key').on(t.secretKey),
    uniqueIndex('projects_secret_key_hash_key').on(t.secretKeyHash),
  ],
);

export const memberships = pgTable(
  'memberships',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    role: text('role').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.userId] }), index('memberships_user_idx').on(t.userId, t.createdAt)],
);
