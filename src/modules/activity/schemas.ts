import { z } from 'zod';
import { lengthFirst } from '../../http/bounded-array.ts';
import { limitParam } from '../../http/pagination.ts';
import { rangeQuery } from '../events/range.ts';
import { ACTIVITY_TYPES } from './types.ts';

/** `types=email.opened,event` or `types=email.opened&types=event`. */
const typesParam = z
  .union([z.string(), z.array(z.string())])
  .optional()
  .transform((v) =>
    v === undefined
      ? []
      : (Array.isArray(v) ? v : [v])
          .flatMap((s) => s.split(','))
          .map((s) => s.trim())
          .filter(Boolean),
  )
  .pipe(lengthFirst(z.array(z.enum(ACTIVITY_TYPES)).max(ACTIVITY_TYPES.length * 2)));

export const activityQuery = rangeQuery.extend({
  limit: limitParam,
  cursor: z.string().max(500).optional(),
  types: typesParam,
  contactId: z.string().max(100).optional(),
});

export type ActivityQuery = z.output<typeof activityQuery>;

export const recentCountQuery = z.object({
  minutes: z.coerce.number({ invalid_type_error: 'minutes must be a number' }).int().min(1).max(43_200, 'minutes must be at most 43200 (30 days)').default(60),
});

export const upcomingQuery = z.object({
  limit: limitParam,
});

export type ActivityItem = {
  id: string;
  type: string;
  occurredAt: string;
  contact: { id: string; email: string } | null;
  emailId?: string;
  subject?: string;
  eventName?: string;
  data: Record<string, unknown>;
};

// Responses (the document and the strict response check: src/http/openapi.ts)

const contactRef = z.object({ id: z.string(), email: z.string() });

export const activityItemSchema = z.object({
  id: z.string(),
  type: z.string(),
  occurredAt: z.string(),
  contact: contactRef.nullable(),
  emailId: z.string().optional(),
  subject: z.string().optional(),
  eventName: z.string().optional(),
  data: z.record(z.unknown()),
});

export const activityStatsSchema = z.object({ from: z.string(), to: z.string(), total: z.number().int(), counts: z.record(z.number().int()) });

export const recentCountSchema = z.object({ count: z.number().int(), minutes: z.number().int(), since: z.string() });

export const activityTypesSchema = z.object({ types: z.array(z.string()) });

export const upcomingSchema = z.object({
  data: z.array(
    z.object({
      type: z.enum(['campaign', 'workflow']),
      id: z.string(),
      name: z.string(),
      scheduledFor: z.string(),
      contact: contactRef.nullable().optional(),
      details: z.record(z.unknown()).optional(),
    }),
  ),
});
