import { z } from 'zod';

/** A monthly cap: a whole number of emails from 0, or null for unlimited. */
const cap = z.number().int().min(0).max(1_000_000_000).nullable();

export const putLimitsBody = z
  .object({ transactional: cap, campaigns: cap, workflows: cap, inbound: cap })
  .partial()
  .strict()
  .refine((v) => Object.keys(v).length > 0, { message: 'Give at least one of transactional, campaigns, workflows, inbound' });

export type CategoryLimit = { limit: number | null; usage: number; percentage: number | null; isWarning: boolean; isBlocked: boolean };
