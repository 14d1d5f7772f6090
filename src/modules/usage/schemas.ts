import { z } from 'zod';

/** Response schemas of the usage answers (`GET .../usage`): who references a field, event or template. */

export const usageRefSchema = z.object({ id: z.string(), name: z.string() });

export const fieldUsersSchema = z.object({
  segments: z.array(usageRefSchema),
  campaigns: z.array(usageRefSchema),
  workflows: z.array(usageRefSchema),
});

export const eventNameUsersSchema = z.object({
  segments: z.array(usageRefSchema),
  campaigns: z.array(usageRefSchema),
  workflows: z.array(usageRefSchema),
});

export const templateUsersSchema = z.object({
  campaigns: z.array(usageRefSchema),
  workflows: z.array(usageRefSchema.extend({ stepId: z.string() })),
});
