import { z } from 'zod';

export const emailField = z.string().trim().toLowerCase().max(254).email();

export const signupBody = z.object({
  email: emailField,
  password: z.string().min(8, 'Password must be at least 8 characters').max(256),
});

export const loginBody = z.object({
  email: z.string().trim().toLowerCase().max(254),
  password: z.string().max(256),
});

export const tokenBody = z.object({ token: z.string().min(1).max(2000) });

export const emailOnlyBody = z.object({ email: z.string().trim().toLowerCase().max(254) });

export const resetPasswordBody = z.object({
  token: z.string().min(1).max(2000),
  password: z.string().min(8, 'Password must be at least 8 characters').max(256),
});

export const changePasswordBody = z.object({
  currentPassword: z.string().min(1).max(256),
  password: z.string().min(8, 'Password must be at least 8 characters').max(256),
});

export type UserRecord = { id: string; email: string; emailVerified: boolean; createdAt: string; updatedAt: string };
