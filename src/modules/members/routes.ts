import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { projectOf, requireUser, userOf } from '../../http/auth.ts';
import { sessionUserId } from '../../http/sessions.ts';
import { describe, describer } from '../../http/openapi.ts';
import { parse } from '../../http/validate.ts';
import { PAGE_HEADERS, page } from '../preferences/page.ts';
import { projectIdParams } from '../projects/schemas.ts';
import { acceptInvitation } from './invitations.ts';
import {
  acceptBody,
  addMemberBody,
  addMemberResultSchema,
  invitationParams,
  memberListSchema,
  memberParams,
  memberSchema,
  updateMemberBody,
} from './schemas.ts';
import { addMember, listMembers, removeMember, revokeInvitation, updateMemberRole } from './service.ts';

/** The signed-in member acting on the project of the URL (its role from http/roles.ts). */
const actorOf = (req: FastifyRequest) => ({ ...projectOf(req), userId: userOf(req) });

/**
 * `/projects/:id/members*` and `/projects/:id/invitations/*`: the session cookie only, never an API
 * key (a leaked key must not make itself a member that outlives key rotation); roles enforced by
 * http/roles.ts. And accepting an invitation.
 */
export function memberRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireUser(ctx);
  const doc = describer('Members', 'session');

  app.get(
    '/projects/:id/members',
    {
      schema: doc({
        operationId: 'members.list',
        summary: 'Members and pending invitations',
        params: projectIdParams,
        responses: { 200: memberListSchema },
        errors: [404],
      }),
      onRequest,
    },
    async (req) => {
      parse(projectIdParams, req.params);
      return listMembers(ctx, projectOf(req).projectId);
    },
  );

  app.post(
    '/projects/:id/members',
    {
      schema: doc({
        operationId: 'members.add',
        summary: 'Invite an address by email',
        description:
          'Always sends an invitation email, also to an address that has an account: the answer is the same either way, and the address joins when its owner, signed in with it, opens the link (POST /invitations/accept). 409 if a member already has this address.',
        params: projectIdParams,
        body: addMemberBody,
        responses: { 201: addMemberResultSchema },
        errors: [403, 404, 409, 429],
      }),
      onRequest,
    },
    async (req, reply) => {
      parse(projectIdParams, req.params);
      const result = await addMember(ctx, actorOf(req), parse(addMemberBody, req.body));
      return reply.status(201).send(result);
    },
  );

  app.patch(
    '/projects/:id/members/:userId',
    {
      schema: doc({
        operationId: 'members.updateRole',
        answeredWhenDiskFull: true,
        summary: "Change a member's role",
        params: memberParams,
        body: updateMemberBody,
        responses: { 200: memberSchema },
        errors: [403, 404, 409],
      }),
      onRequest,
    },
    async (req) => {
      const { userId } = parse(memberParams, req.params);
      return updateMemberRole(ctx, projectOf(req).projectId, userId, parse(updateMemberBody, req.body).role);
    },
  );

  app.delete(
    '/projects/:id/members/:userId',
    {
      schema: doc({ operationId: 'members.remove', summary: 'Remove a member', params: memberParams, responses: { 204: null }, errors: [403, 404, 409] }),
      onRequest,
    },
    async (req, reply) => {
      const { userId } = parse(memberParams, req.params);
      await removeMember(ctx, actorOf(req), userId);
      return reply.status(204).send();
    },
  );

  app.delete(
    '/projects/:id/invitations/:invitationId',
    {
      schema: doc({
        operationId: 'members.revokeInvitation',
        summary: 'Revoke a pending invitation',
        params: invitationParams,
        responses: { 204: null },
        errors: [403, 404],
      }),
      onRequest,
    },
    async (req, reply) => {
      const { invitationId } = parse(invitationParams, req.params);
      await revokeInvitation(ctx, projectOf(req).projectId, invitationId);
      return reply.status(204).send();
    },
  );

  app.post(
    '/invitations/accept',
    {
      schema: describe({
        operationId: 'invitations.accept',
        summary: 'Join a project with an invitation token',
        tag: 'Invitations',
        access: 'session',
        body: acceptBody,
        responses: { 200: z.object({ projectId: z.string(), role: z.enum(['ADMIN', 'MEMBER']) }) },
        errors: [400, 403, 404, 409],
      }),
      onRequest: requireUser(ctx),
    },
    async (req) => acceptInvitation(ctx, userOf(req), parse(acceptBody, req.body).token),
  );

  // The link in the invitation email: accepts for a signed-in browser, otherwise says what to do.
  app.get(
    '/invitations/accept',
    {
      schema: describe({
        operationId: 'invitations.acceptLink',
        summary: 'The emailed invitation link (HTML page)',
        tag: 'Invitations',
        access: 'none',
        query: acceptBody,
        responses: {
          200: { schema: null, contentType: 'text/html', description: 'What happened, or what to do' },
          400: { schema: null, contentType: 'text/html', description: 'The link cannot be used' },
        },
      }),
    },
    async (req, reply) => {
      const { token } = parse(acceptBody, req.query);
      const userId = await sessionUserId(ctx, req);
      const send = (status: number, message: string, links?: { text: string; href: string }[]) =>
        reply
          .status(status)
          .headers(PAGE_HEADERS)
          .send(page({ title: 'Invitation', message, links }));
      if (!userId) {
        // The dashboard accepts at /app/invitation once the browser has an account (web/src/pages/Invitation.tsx).
        const next = encodeURIComponent(`/invitation?token=${encodeURIComponent(token)}`);
        return send(200, 'You were invited to a project on Herald. Log in, or create an account, with the invited address to join it.', [
          { text: 'Log in', href: `/app/login?next=${next}` },
          { text: 'Create an account', href: `/app/signup?next=${next}` },
        ]);
      }
      try {
        await acceptInvitation(ctx, userId, token);
        return send(200, 'You joined the project. Open the dashboard to start.');
      } catch (err) {
        const message = err instanceof Error ? err.message : 'This invitation link cannot be used.';
        return send(400, message);
      }
    },
  );
}
