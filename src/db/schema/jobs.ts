import { sql } from 'drizzle-orm';
import { customType, index, integer, jsonb, pgTable, text, timestamp } from 'drizzle-orm/pg-core';
import { projects } from './users.ts';

/** An import or bulk job's status (api-spec.md names queued, completed and failed; a running job is processing). */
export const JOB_STATUSES = ['queued', 'processing', 'completed', 'failed'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];
export type ImportError = { row: number; email: string; reason: string };
export type BulkType = 'bulk-subscribe' | 'bulk-unsubscribe' | 'bulk-delete';
/** Why a bulk job left a contact id alone: the only case is an id that is not a contact of the project. */
export const BULK_ERROR_REASONS = ['not_found'] as const;
export type BulkError = { id: string; reason: (typeof BULK_ERROR_REASONS)[number] };

const bytea = customType<{ data: Buffer; driverData: Buffer }>({ dataType: () => 'bytea' });

/**
 * A CSV import (`imp_…`). The uploaded file lives on the row until the job ends, so any worker
 * can run it after a restart. Counters and `processed_rows` are committed with each batch: they
 * are the checkpoint a retried job resumes from.
 */
export const importJobs = pgTable(
  'import_jobs',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    status: text('status').$type<JobStatus>().notNull().default('queued'),
    fileName: text('file_name'),
    /** The uploaded bytes; cleared when the job ends. */
    file: bytea('file'),
    totalRows: integer('total_rows').notNull().default(0),
    processedRows: integer('processed_rows').notNull().default(0),
    imported: integer('imported').notNull().default(0),
    updated: integer('updated').notNull().default(0),
    skipped: integer('skipped').notNull().default(0),
    /** The first rows reported (capped); `error_count` counts them all. */
    errors: jsonb('errors')
      .$type<ImportError[]>()
      .notNull()
      .default(sql`'[]'::jsonb`),
    errorCount: integer('error_count').notNull().default(0),
    failureReason: text('failure_reason'),
    attempts: integer('attempts').notNull().default(0),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    completedAt: timestamp('completed_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [index('import_jobs_project_created_idx').on(t.projectId, t.createdAt)],
);

/** A bulk subscribe / unsubscribe / delete (`blk_…`) of at most 1,000 contact ids. */
export const bulkJobs = pgTable(
  'bulk_jobs',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    type: text('type').$type<BulkType>().notNull(),
    status: text('status').$type<JobStatus>().notNull().default('queued'),
    contactIds: text('contact_ids').array().notNull(),
    total: integer('total').notNull(),
    processed: integer('processed').notNull().default(0),
    succeeded: integer('succeeded').notNull().default(0),
    unchanged: integer('unchanged').notNull().default(0),
    failed: integer('failed').notNull().default(0),
    errors: jsonb('errors')
      .$type<BulkError[]>()
      .notNull()
      .default(sql`'[]'::jsonb`),
    failureReason: text('failure_reason'),
    attempts: integer('attempts').notNull().default(0),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    completedAt: timestamp('completed_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [index('bulk_jobs_project_created_idx').on(t.projectId, t.createdAt)],
);
