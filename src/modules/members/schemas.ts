import { z } from 'zod';

export const memberRole = z.enum(['ADMIN', 'MEMBER']);

export const addMemberBody = z
  .object({
    email: z.string().trim().toLowerCase().max(254).email(),
    role: memberRole.default('MEMBER'),
  })
  .strict();

export const updateMemberBody = z.object({ role: memberRole }).strict();

export const memberParams = z.object({ id: z.string().min(1).max(100), userId: z.string().min(1).max(100) });
export const invitationParams = z.object({ id: z.string().min(1).max(100), invitationId: z.string().min(1).max(100) });

export const acceptBody = z.object({ token: z.string().min(1).max(2000) });

export type MemberRecord = { userId: string; email: string; role: 'OWNER' | 'ADMIN' | 'MEMBER'; createdAt: string };

export type InvitationRecord = {
  id: string;
  email: string;
  role: 'ADMIN' | 'MEMBER';
  invitedBy: string | null;
  createdAt: string;
  expiresAt: string;
};

export type MemberList = { members: MemberRecord[]; invitations: InvitationRecord[] };

// Responses (the document and the strict response check: src/http/openapi.ts)

export const memberSchema = z.object({ userId: z.string(), email: z.string(), role: z.enum(['OWNER', 'ADMIN', 'MEMBER']), createdAt: z.string() });

export const invitationSchema = z.object({
  id: z.string(),
  email: z.string(),
  role: z.enum(['ADMIN', 'MEMBER']),
  invitedBy: z
    .string()
    .nullable()
    .describe('The user id of the member who sent it; null once that account is deleted (or for one sent with the API key, before keys were refused here)'),
  createdAt: z.string(),
  expiresAt: z.string(),
});

export const memberListSchema = z.object({ members: z.array(memberSchema), invitations: z.array(invitationSchema) });

/** The same answer whether or not the address has an account (service.ts `addMember`). */
export const addMemberResultSchema = z.object({ status: z.literal('invited'), invitation: invitationSchema });
