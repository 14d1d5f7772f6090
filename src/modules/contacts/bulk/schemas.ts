import { z } from 'zod';
import { PREFIXED_ID } from '../../../db/ids.ts';
import type { BulkError, BulkType, JobStatus } from '../../../db/schema/jobs.ts';
import { isStorableText } from '../../../db/storable-text.ts';
import { lengthFirst } from '../../../http/bounded-array.ts';

/** api-spec § Limits: at most 1,000 contacts per bulk call. */
export const MAX_BULK_IDS = 1000;

export const BULK_JOB_ID = PREFIXED_ID('blk');

export const BULK_TYPES = ['bulk-subscribe', 'bulk-unsubscribe', 'bulk-delete'] as const satisfies readonly BulkType[];

export const bulkBody = z
  .object({
    contactIds: lengthFirst(
      z
        .array(
          z
            .string()
            .min(1, 'Contact ids must not be empty')
            .max(100, 'Contact ids are at most 100 characters')
            .refine(isStorableText, 'Contact ids must not contain NUL characters'),
        )
        .min(1, 'At least one contact id is required')
        .max(MAX_BULK_IDS, `At most ${MAX_BULK_IDS} contact ids per call`),
    ),
  })
  .strict();

export const bulkJobParams = z.object({ jobId: z.string() });

export type BulkJobRecord = {
  jobId: string;
  type: BulkType;
  status: JobStatus;
  total: number;
  processed: number;
  succeeded: number;
  unchanged: number;
  failed: number;
  errors: BulkError[];
  failureReason?: string;
  createdAt: string;
  completedAt: string | null;
};

export const bulkPayload = z.object({ jobId: z.string().regex(BULK_JOB_ID) });
export type BulkPayload = z.infer<typeof bulkPayload>;
