import { z } from 'zod';
import { LOOSE_EMAIL, MAX_EMAIL_LENGTH } from './syntax.ts';

export const verifyBody = z
  .object({
    email: z.string().trim().max(MAX_EMAIL_LENGTH, `Email must be at most ${MAX_EMAIL_LENGTH} characters (RFC 5321)`).regex(LOOSE_EMAIL, 'Invalid email'),
  })
  .strict();
