import assert from 'node:assert/strict';
import type { AppContext } from '../../src/context.ts';
import { invitationLink } from '../../src/modules/members/invitations.ts';
import type { Api, Res } from './http.ts';

type Server = { api: Api; ctx: AppContext };

/** The token of the link emailed for a pending invitation (signed the same way), without the mail round trip. */
export const invitationTokenFor = (ctx: AppContext, invitation: { id: string; email: string }): string =>
  new URL(invitationLink(ctx, invitation)).searchParams.get('token') ?? '';

/** The invitee, signed in with the invited address, accepts the invitation. Returns the accept answer. */
export async function acceptInvitationAs(server: Server, invitation: { id: string; email: string }, cookie: string): Promise<Res> {
  const accepted = await server.api.post('/invitations/accept', { token: invitationTokenFor(server.ctx, invitation) }, { cookie });
  assert.equal(accepted.status, 200, accepted.text);
  return accepted;
}

/**
 * Adding someone to a project is an invitation they accept (src/modules/members/service.ts): `invited`
 * is the answer of POST /projects/:id/members, `cookie` the invitee's session. Returns the accept answer.
 */
export async function joinWithInvitation(server: Server, invited: Res, cookie: string): Promise<Res> {
  assert.equal(invited.status, 201, invited.text);
  assert.equal(invited.body.status, 'invited', invited.text);
  return acceptInvitationAs(server, invited.body.invitation, cookie);
}
