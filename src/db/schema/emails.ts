import { sql } from 'drizzle-orm';
import { customType, index, integer, jsonb, pgTable, primaryKey, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { contacts } from './contacts.ts';
import { projects } from './users.ts';

const bytea = customType<{ data: Buffer }>({ dataType: () => 'bytea' });

export type EmailType = 'TRANSACTIONAL' | 'MARKETING' | 'HEADLESS';
export type EmailStatus =
  | 'QUEUED'
  | 'SENDING'
  | 'SENT'
  | 'DELIVERED'
  | 'BOUNCED'
  | 'COMPLAINED'
  | 'FAILED'
  | 'SKIPPED'
  | 'SUPPRESSED';

export type StoredAttachment = {
  filename: string;
  content: string; // base64
  contentType: string;
  contentId?: string;
  disposition?: 'attachment' | 'inline';
};

/**
 * One email to one recipient. The request stores the sources and the one-off variables; the
 * delivery worker renders, builds, signs and sends it, moving `status` forward.
 */
export const emails = pgTable(
  'emails',
  {
    id: uuid('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    contactId: text('contact_id').references(() => contacts.id, { onDelete: 'set null' }),
    toEmail: text('to_email').notNull(),
    toName: text('to_name'),
    fromEmail: text('from_email').notNull(),
    fromName: text('from_name'),
    replyTo: text('reply_to'),
    type: text('type').$type<EmailType>().notNull(),
    subjectSource: text('subject_source').notNull(),
    bodySource: text('body_source').notNull(),
    /** One-off variables for this email (not stored on the contact). */
    variables: jsonb('variables').$type<Record<string, unknown>>().notNull().default(sql`'{}'::jsonb`),
    headers: jsonb('headers').$type<Record<string, string>>().notNull().default(sql`'{}'::jsonb`),
    attachments: jsonb('attachments').$type<StoredAttachment[]>(),
    templateId: uuid('template_id'),
    campaignId: uuid('campaign_id'),
    workflowId: uuid('workflow_id'),
    status: text('status').$type<EmailStatus>().notNull(),
    /** Why a message was not sent or failed: 'unsubscribed', the SMTP reply, a render error. */
    error: text('error'),
    subject: text('subject'),
    messageId: text('message_id'),
    attempts: integer('attempts').notNull().default(0),
    /** A claimed message belongs to its worker until then; after that another worker may take it over. */
    lockedUntil: timestamp('locked_until', { withTimezone: true, mode: 'date' }),
    sentAt: timestamp('sent_at', { withTimezone: true, mode: 'date' }),
    deliveredAt: timestamp('delivered_at', { withTimezone: true, mode: 'date' }),
    openedAt: timestamp('opened_at', { withTimezone: true, mode: 'date' }),
    clickedAt: timestamp('clicked_at', { withTimezone: true, mode: 'date' }),
    openCount: integer('open_count').notNull().default(0),
    clickCount: integer('click_count').notNull().default(0),
    bouncedAt: timestamp('bounced_at', { withTimezone: true, mode: 'date' }),
    complainedAt: timestamp('complained_at', { withTimezone: true, mode: 'date' }),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [
    index('emails_project_created_idx').on(t.projectId, t.createdAt, t.id),
    index('emails_contact_created_idx').on(t.contactId, t.createdAt, t.id),
    index('emails_campaign_idx').on(t.campaignId, t.status),
    // A recipient never gets a campaign twice: at most one email per (campaign, contact).
    uniqueIndex('emails_campaign_contact_key').on(t.campaignId, t.contactId).where(sql`campaign_id IS NOT NULL`),
    index('emails_project_message_id_idx').on(t.messageId),
  ],
);

/** The RFC 5322 source of captured messages (no SMTP_URL), for GET /emails/:id/raw. */
export const emailRaw = pgTable('email_raw', {
  emailId: uuid('email_id')
    .primaryKey()
    .references(() => emails.id, { onDelete: 'cascade' }),
  raw: bytea('raw').notNull(),
});

/** Addresses that hard-bounced or complained: no email of any type is delivered to them. */
export const suppressions = pgTable(
  'suppressions',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    email: text('email').notNull(),
    reason: text('reason').notNull(),
    emailId: uuid('email_id'),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.email] }), index('suppressions_project_created_idx').on(t.projectId, t.createdAt)],
);

/** Per-project send throttle shared by every worker: the next free send slot. */
export const sendThrottle = pgTable('send_throttle', {
  projectId: text('project_id')
    .primaryKey()
    .references(() => projects.id, { onDelete: 'cascade' }),
  nextSlot: timestamp('next_slot', { withTimezone: true, mode: 'date' }).notNull(),
});
