import { sql } from 'drizzle-orm';
import { boolean, index, integer, jsonb, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import type { EmailType } from './emails.ts';
import { projects } from './users.ts';

export type CampaignStatus = 'DRAFT' | 'SCHEDULED' | 'SENDING' | 'SENT' | 'CANCELLED';
export type AudienceType = 'ALL' | 'SEGMENT' | 'FILTERED';

/**
 * A campaign: content, sender, audience, and the state of its send. While SENDING, the fan-out
 * progress (keyset cursor over the audience) and the id of the one live `campaign-send` job are kept
 * here and changed only under the row lock, so a crashed or duplicated job never writes an email twice.
 */
export const campaigns = pgTable(
  'campaigns',
  {
    id: uuid('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    description: text('description'),
    subject: text('subject').notNull(),
    body: text('body').notNull(),
    fromEmail: text('from_email').notNull(),
    fromName: text('from_name'),
    replyTo: text('reply_to'),
    type: text('type').$type<EmailType>().notNull().default('MARKETING'),
    status: text('status').$type<CampaignStatus>().notNull().default('DRAFT'),
    audienceType: text('audience_type').$type<AudienceType>().notNull().default('ALL'),
    audienceCondition: jsonb('audience_condition').$type<unknown>(),
    segmentId: uuid('segment_id'),
    scheduledFor: timestamp('scheduled_for', { withTimezone: true, mode: 'date' }),
    totalRecipients: integer('total_recipients').notNull().default(0),
    /** When sending started; contacts created after it are not part of the audience. */
    sentAt: timestamp('sent_at', { withTimezone: true, mode: 'date' }),
    completedAt: timestamp('completed_at', { withTimezone: true, mode: 'date' }),
    cancelledAt: timestamp('cancelled_at', { withTimezone: true, mode: 'date' }),
    /** The pg-boss job that may advance this campaign (schedule, fan-out, finalise); any other is stale. */
    sendJobId: uuid('send_job_id'),
    /** Keyset cursor of the fan-out: the last contact written, in (created_at, id) order. */
    fanoutCursorAt: timestamp('fanout_cursor_at', { withTimezone: true, mode: 'date' }),
    fanoutCursorId: text('fanout_cursor_id'),
    fanoutDone: boolean('fanout_done').notNull().default(false),
    /**
     * The `created_at` of the campaign's first and last batch of emails, written with each batch:
     * every email of the campaign lies between them, so its emails list reads the project's
     * emails of that window only (emails/service.ts listEmails). NULL before the first batch, and for
     * campaigns sent before migration 0027.
     */
    emailsFrom: timestamp('emails_from', { withTimezone: true, mode: 'date' }),
    emailsUntil: timestamp('emails_until', { withTimezone: true, mode: 'date' }),
    /** Emails still QUEUED/SENDING at the last check, and when that number last moved (stall detection). */
    pendingCount: integer('pending_count').notNull().default(0),
    progressAt: timestamp('progress_at', { withTimezone: true, mode: 'date' }),
    /** The send engine's last tick: the watchdog restarts a campaign whose engine went quiet. */
    heartbeatAt: timestamp('heartbeat_at', { withTimezone: true, mode: 'date' }),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [
    index('campaigns_project_created_idx').on(t.projectId, t.createdAt, t.id),
    index('campaigns_project_updated_idx').on(t.projectId, t.updatedAt, t.id),
    index('campaigns_project_lower_name_idx').on(t.projectId, sql`lower(${t.name})`, t.id),
    index('campaigns_project_status_idx').on(t.projectId, t.status),
    // GET /analytics/top-campaigns reads the newest sent campaigns of a range, at most 1,000.
    index('campaigns_project_sent_idx')
      .on(t.projectId, t.sentAt)
      .where(sql`${t.sentAt} IS NOT NULL`),
    // The watchdog and GET /activity/upcoming look only at campaigns in flight.
    index('campaigns_active_idx')
      .on(t.status, t.scheduledFor)
      .where(sql`${t.status} IN ('SCHEDULED', 'SENDING')`),
  ],
);
