import { doublePrecision, index, integer, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { projects } from './users.ts';

/** Each time the reputation guard disabled a project, with the rates that caused it (percent). */
export const projectSuspensions = pgTable(
  'project_suspensions',
  {
    id: uuid('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    reason: text('reason').notNull(),
    bounceRate7d: doublePrecision('bounce_rate_7d').notNull(),
    bounceRateAll: doublePrecision('bounce_rate_all').notNull(),
    complaintRate7d: doublePrecision('complaint_rate_7d').notNull(),
    complaintRateAll: doublePrecision('complaint_rate_all').notNull(),
    sentLast7Days: integer('sent_last_7_days').notNull(),
    sentAllTime: integer('sent_all_time').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [index('project_suspensions_project_created_idx').on(t.projectId, t.createdAt)],
);
