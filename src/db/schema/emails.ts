import { sql } from 'drizzle-orm';
import { bigint, customType, index, integer, jsonb, pgTable, primaryKey, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { projects } from './users.ts';

const bytea = customType<{ data: Buffer }>({ dataType: () => 'bytea' });

export type EmailType = 'TRANSACTIONAL' | 'MARKETING' | 'HEADLESS';
export type EmailStatus = 'QUEUED' | 'SENDING' | 'SENT' | 'DELIVERED' | 'BOUNCED' | 'COMPLAINED' | 'FAILED' | 'SKIPPED' | 'SUPPRESSED';

export type StoredAttachment = {
  filename: string;
  content: string; // base64
  contentType: string;
  contentId?: string;
  disposition?: 'attachment' | 'inline';
};

/**
 * What the emails of one request share: the body source, one-off variables, custom headers and
 * attachments, stored once and referenced by each recipient's email (a /v1/send to 50 recipients,
 * a campaign fan-out batch). Written only by queue.ts together with its emails; read by the
 * delivery composer. Emails are deleted before their content (reset), or with the project.
 */
export const emailContents = pgTable(
  'email_contents',
  {
    id: uuid('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    bodySource: text('body_source').notNull(),
    /** One-off variables (not stored on the contact). */
    variables: jsonb('variables')
      .$type<Record<string, unknown>>()
      .notNull()
      .default(sql`'{}'::jsonb`),
    headers: jsonb('headers')
      .$type<Record<string, string>>()
      .notNull()
      .default(sql`'{}'::jsonb`),
    attachments: jsonb('attachments').$type<StoredAttachment[]>(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    /** When EMAIL_CONTENT_RETENTION_DAYS emptied the body, variables, headers and attachments (emails/retention.ts). */
    clearedAt: timestamp('cleared_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [
    index('email_contents_project_idx').on(t.projectId),
    // The retention job's scan: contents not yet cleared, oldest first.
    index('email_contents_uncleared_created_idx')
      .on(t.createdAt)
      .where(sql`cleared_at IS NULL`),
  ],
);

/**
 * One email to one recipient. The request stores the subject source and a reference to the shared
 * content (email_contents); the delivery worker renders, builds, signs and sends it, moving
 * `status` forward.
 */
export const emails = pgTable(
  'emails',
  {
    id: uuid('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    // No foreign key (migration 0026): a contact's delete leaves its emails without one itself (contacts/deleted.ts).
    contactId: text('contact_id'),
    toEmail: text('to_email').notNull(),
    toName: text('to_name'),
    fromEmail: text('from_email').notNull(),
    fromName: text('from_name'),
    replyTo: text('reply_to'),
    type: text('type').$type<EmailType>().notNull(),
    /** Kept on the email (at most 998 characters): lists and events show it before the email is rendered. */
    subjectSource: text('subject_source').notNull(),
    contentId: uuid('content_id')
      .notNull()
      .references(() => emailContents.id),
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
    /**
     * Set by the sending worker just before the relay is told to accept the message (the final
     * dot of DATA): from then on the email is treated as sent and never handed to a relay again.
     */
    handedOffAt: timestamp('handed_off_at', { withTimezone: true, mode: 'date' }),
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
    // Partial, like the message-id index below: an email's row is written three times (queued,
    // claimed, recorded), and a transactional email would add an entry for its NULL each time.
    index('emails_campaign_idx')
      .on(t.campaignId, t.status)
      .where(sql`campaign_id IS NOT NULL`),
    index('emails_content_idx').on(t.contentId),
    // The delivery watchdog's scan: only emails still waiting for delivery, however many were sent.
    index('emails_waiting_idx')
      .on(t.status, t.lockedUntil)
      .where(sql`status IN ('QUEUED', 'SENDING')`),
    // A recipient never gets a campaign twice: at most one email per (campaign, contact).
    uniqueIndex('emails_campaign_contact_key')
      .on(t.campaignId, t.contactId)
      .where(sql`campaign_id IS NOT NULL`),
    // Only sent emails have a Message-ID; the relay's feedback looks them up by it.
    index('emails_project_message_id_idx')
      .on(t.messageId)
      .where(sql`message_id IS NOT NULL`),
    // GET /emails?status= of a rare status: its newest page without reading past the common ones.
    // The common statuses are dense among the newest emails (the project index finds a page at once),
    // and an email enters a rare status once, so delivery writes no entry here.
    index('emails_project_rare_status_idx')
      .on(t.projectId, t.status, t.createdAt, t.id)
      .where(sql`status IN ('BOUNCED', 'COMPLAINED', 'FAILED', 'SKIPPED', 'SUPPRESSED')`),
    // Analytics: each outcome counted over time by an index-only range scan per project.
    index('emails_project_sent_at_idx')
      .on(t.projectId, t.sentAt)
      .where(sql`sent_at IS NOT NULL`),
    index('emails_project_delivered_at_idx')
      .on(t.projectId, t.deliveredAt)
      .where(sql`delivered_at IS NOT NULL`),
    index('emails_project_opened_at_idx')
      .on(t.projectId, t.openedAt)
      .where(sql`opened_at IS NOT NULL`),
    index('emails_project_clicked_at_idx')
      .on(t.projectId, t.clickedAt)
      .where(sql`clicked_at IS NOT NULL`),
    index('emails_project_bounced_at_idx')
      .on(t.projectId, t.bouncedAt)
      .where(sql`bounced_at IS NOT NULL`),
    index('emails_project_complained_at_idx')
      .on(t.projectId, t.complainedAt)
      .where(sql`complained_at IS NOT NULL`),
  ],
);

/**
 * The RFC 5322 source of captured messages (no SMTP_URL), for GET /emails/:id/raw; deleted with its
 * content by EMAIL_CONTENT_RETENTION_DAYS.
 */
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

/**
 * The number of suppressions per project and reason behind GET /suppressions' `total`, kept by
 * statement-level triggers on `suppressions` (migration 0031). One row per key and writing backend
 * (`shard`, db/counter-rows.ts).
 */
export const suppressionCounts = pgTable(
  'suppression_counts',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    reason: text('reason').notNull(),
    shard: integer('shard').notNull(),
    /** Per shard; may be negative (the sum over the shards is the count). */
    count: bigint('count', { mode: 'number' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.reason, t.shard] })],
);

/** Per-project send throttle shared by every worker: the next free send slot. */
export const sendThrottle = pgTable('send_throttle', {
  projectId: text('project_id')
    .primaryKey()
    .references(() => projects.id, { onDelete: 'cascade' }),
  nextSlot: timestamp('next_slot', { withTimezone: true, mode: 'date' }).notNull(),
});

/** The outcome counters of the two summaries below: emails with each outcome, as campaigns/stats.ts counts them. */
const outcomeCounts = () => ({
  sent: integer('sent').notNull().default(0),
  delivered: integer('delivered').notNull().default(0),
  opened: integer('opened').notNull().default(0),
  clicked: integer('clicked').notNull().default(0),
  bounced: integer('bounced').notNull().default(0),
  complained: integer('complained').notNull().default(0),
});

/**
 * The exact number of emails per project and status, for the `total` of GET /emails (a count of the
 * emails themselves grows with the table). Kept by statement-level triggers on `emails` defined in
 * migration 0018 (every insert, delete and update, cascades and resets included). A row per
 * writing backend (`shard` = its pid; 0 = folded), so that no two live transactions ever write one
 * row: counter writes never wait, and cannot deadlock. db/counter-rows.ts folds exited backends' rows.
 */
export const emailCounts = pgTable(
  'email_counts',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    status: text('status').$type<EmailStatus>().notNull(),
    shard: integer('shard').notNull(),
    /** Per shard; may be negative (the sum over the shards is the count). */
    count: bigint('count', { mode: 'number' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.status, t.shard] })],
);

/**
 * Email outcomes per project and quarter hour (UTC), for GET /analytics/timeseries: the number of
 * emails whose sent_at (or, never sent, bounced_at), delivered_at, opened_at, … falls in the slot.
 * Every local hour, day and week starts on a quarter hour in every time zone in use, so whole
 * buckets are sums of slots. Written by the statements in emails/lifecycle.ts that set those
 * columns (analytics/outcome-rollups.ts); emails are deleted only with their project (reset, delete).
 */
export const emailOutcomeSlots = pgTable(
  'email_outcome_slots',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    slot: timestamp('slot', { withTimezone: true, mode: 'date' }).notNull(),
    ...outcomeCounts(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.slot] })],
);

/** Email outcomes per campaign over all time, for GET /analytics/top-campaigns; written with the slots above. */
export const campaignOutcomes = pgTable('campaign_outcomes', {
  campaignId: uuid('campaign_id').primaryKey(),
  projectId: text('project_id')
    .notNull()
    .references(() => projects.id, { onDelete: 'cascade' }),
  ...outcomeCounts(),
});

/** Email outcomes per campaign and quarter hour (UTC), as email_outcome_slots per project: a campaign's series (GET /analytics/campaign-stats). */
export const campaignOutcomeSlots = pgTable(
  'campaign_outcome_slots',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    campaignId: uuid('campaign_id').notNull(),
    slot: timestamp('slot', { withTimezone: true, mode: 'date' }).notNull(),
    ...outcomeCounts(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.campaignId, t.slot] })],
);

/**
 * The recipients who unsubscribed after a campaign's email was sent to them, once each: a
 * campaign's `unsubscribedCount` and its series' unsubscribes. Written by a trigger on `events`
 * (migration 0030) from every `contact.unsubscribed` a statement inserts, whatever the path, so
 * that a campaign's count stays what it was when events expire or its contacts are deleted, and a
 * read counts the campaign's own rows rather than the project's unsubscribes since it was sent.
 */
export const campaignUnsubscribes = pgTable(
  'campaign_unsubscribes',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    campaignId: uuid('campaign_id').notNull(),
    contactId: text('contact_id').notNull(),
    /** The first unsubscribe after the email was sent. */
    unsubscribedAt: timestamp('unsubscribed_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.campaignId, t.contactId] })],
);
