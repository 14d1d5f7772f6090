import { z } from 'zod';
import { limitParam } from '../../http/pagination.ts';
import { rangeQuery } from '../events/range.ts';
import { ACTIVITY_TYPES } from './types.ts';

/** `types=email.opened,event` or `types=email.opened&types=event`. */
const typesParam = z
  .union([z.string(), z.array(z.string())])
  .optional()
  .transform((v) => (v === undefined ? [] : (Array.isArray(v) ? v : [v]).flatMap((s) => s.split(',')).map((s) => s.trim()).filter(Boolean)))
  .pipe(z.array(z.enum(ACTIVITY_TYPES)).max(ACTIVITY_TYPES.length * 2));

export const activityQuery = rangeQuery.extend({
  limit: limitParam,
  cursor: z.string().max(500).optional(),
  types: typesParam,
  contactId: z.string().max(100).optional(),
});

export type ActivityQuery = z.output<typeof activityQuery>;

export const recentCountQuery = z.object({
  minutes: z.coerce
    .number({ invalid_type_error: 'minutes must be a number' })
    .int()
    .min(1)
    .max(43_200, 'minutes must be at most 43200 (30 days)')
    .default(60),
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
