import { sql } from 'drizzle-orm';
import { index, jsonb, pgTable, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { projects } from './users.ts';

export type DomainStatus = 'pending' | 'verified';

/** One DNS record Herald asks the owner to publish, with the result of the last check. */
export type StoredDnsRecord = {
  type: 'TXT' | 'CNAME' | 'MX';
  name: string;
  value: string;
  priority?: number;
  purpose: 'dkim' | 'verification' | 'spf' | 'dmarc' | 'return-path';
  required: boolean;
  found?: boolean;
};

/** A sender domain of a project, with its DKIM key (private half encrypted, see dkim-keys.ts). */
export const domains = pgTable(
  'domains',
  {
    id: uuid('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    domain: text('domain').notNull(),
    status: text('status').$type<DomainStatus>().notNull().default('pending'),
    dkimSelector: text('dkim_selector').notNull(),
    /** Base64 SPKI DER: the `p=` of the DKIM record. */
    dkimPublicKey: text('dkim_public_key').notNull(),
    /** Base64 of iv ‖ tag ‖ AES-256-GCM ciphertext of the PKCS#8 PEM. */
    dkimPrivateKeyEnc: text('dkim_private_key_enc').notNull(),
    records: jsonb('records')
      .$type<StoredDnsRecord[]>()
      .notNull()
      .default(sql`'[]'::jsonb`),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    verifiedAt: timestamp('verified_at', { withTimezone: true, mode: 'date' }),
    lastCheckedAt: timestamp('last_checked_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [uniqueIndex('domains_project_domain_key').on(t.projectId, t.domain), index('domains_status_checked_idx').on(t.status, t.lastCheckedAt)],
);
