import { z } from 'zod';

/** A monthly cap: a whole number of emails from 0, or null for unlimited. */
const cap = z.number().int().min(0).max(1_000_000_000).nullable();

export const putLimitsBody = z
  .object({ transactional: cap, campaigns: cap, workflows: cap, inbound: cap })
  .partial()
  .strict()
  .refine((v) => Object.keys(v).length > 0, { message: 'Give at least one of transactional, campaigns, workflows, inbound' });

/**
 * One category's view: `limit` is the cap that binds. With Stripe on, `planLimit` is the plan's cap
 * and `customLimit` the project's own (each null when none); `limit` is the lower of the two.
 */
export type CategoryLimit = {
  limit: number | null;
  usage: number;
  percentage: number | null;
  isWarning: boolean;
  isBlocked: boolean;
  planLimit?: number | null;
  customLimit?: number | null;
};
