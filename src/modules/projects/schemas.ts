import { z } from 'zod';

export const createProjectBody = z.object({
  name: z.string().trim().min(1).max(100),
});

export const updateProjectBody = z
  .object({
    name: z.string().trim().min(1).max(100),
    tracking: z.enum(['ENABLED', 'DISABLED', 'MARKETING_ONLY']),
    language: z.string().trim().min(2).max(35),
  })
  .partial()
  .strict();

export const projectIdParams = z.object({ id: z.string().min(1).max(100) });

export type ProjectRecord = {
  id: string;
  name: string;
  publicKey: string;
  secretKey: string;
  disabled: boolean;
  disabledReason: string | null;
  tracking: 'ENABLED' | 'DISABLED' | 'MARKETING_ONLY';
  language: string;
  role: 'OWNER' | 'ADMIN' | 'MEMBER';
  createdAt: string;
  updatedAt: string;
};
