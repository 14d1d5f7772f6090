import { z } from 'zod';
import { PREFIXED_ID } from '../../../db/ids.ts';
import type { ImportError, JobStatus } from '../../../db/schema/jobs.ts';

/** api-spec § Limits: at most 5 MB per upload. */
export const MAX_IMPORT_BYTES = 5 * 1024 * 1024;

/** Rows reported in `errors` are capped; `errorCount` counts every reported row. */
export const MAX_STORED_ERRORS = 1000;

export const IMPORT_JOB_ID = PREFIXED_ID('imp');

export const importJobParams = z.object({ jobId: z.string() });

/**
 * Why a row was not imported. `data_too_big`: its values are more than 256 KB of JSON (as one
 * request's `data`), or would take the contact's data past 1 MB; `invalid_data`: a value that
 * cannot be stored (a NUL character).
 */
export const IMPORT_REASONS = ['missing_email', 'invalid_email', 'duplicate_email', 'too_many_columns', 'data_too_big', 'invalid_data'] as const;
export type ImportReason = (typeof IMPORT_REASONS)[number];

export type ImportJobRecord = {
  jobId: string;
  type: 'import';
  status: JobStatus;
  fileName: string | null;
  totalRows: number;
  processedRows: number;
  imported: number;
  updated: number;
  skipped: number;
  errors: ImportError[];
  errorCount: number;
  failureReason?: string;
  createdAt: string;
  completedAt: string | null;
};

/** The pg-boss payload of an import: only the job id; everything else is on the job row. */
export const importPayload = z.object({ jobId: z.string().regex(IMPORT_JOB_ID) });
export type ImportPayload = z.infer<typeof importPayload>;
