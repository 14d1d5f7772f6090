import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Clock } from '../src/context.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { type SmtpSink, startSmtpSink } from './helpers/smtp-sink.ts';
import { asMember, invitationToken, signupUser, waitForMail } from './helpers/team.ts';

let server: TestServer;
let sink: SmtpSink;
let owner: Bootstrapped;
let offsetMs = 0;
const clock: Clock = { now: () => new Date(Date.now() + offsetMs) };

before(async () => {
  sink = await startSmtpSink();
  server = await startTestServer({ SMTP_URL: sink.url }, { clock });
  owner = await bootstrap(server.api, 'Team project');
});
after(async () => {
  await server?.stop();
  await sink?.stop();
});

const membersPath = () => `/projects/${owner.project.id}/members`;
const ownerApi = () => server.api.as({ cookie: owner.cookie });

/** The invitee's part: the emailed link, opened while signed in as the invited address. */
async function acceptMailed(user: { email: string; cookie: string }, projectName = 'Team project') {
  const token = invitationToken(await waitForMail(sink, user.email, `invited to ${projectName}`));
  const accepted = await server.api.post('/invitations/accept', { token }, { cookie: user.cookie });
  assert.equal(accepted.status, 200, accepted.text);
  return accepted.body as { projectId: string; role: string };
}

/** What an invitation answer says, without what differs between any two invitations (id, address, times). */
const shapeOf = (body: { status: string; invitation: Record<string, unknown> }) => ({
  status: body.status,
  fields: Object.keys(body).sort(),
  invitation: { ...body.invitation, id: typeof body.invitation.id, email: typeof body.invitation.email, createdAt: 0, expiresAt: 0 },
});

describe('members', () => {
  test('an existing account is invited like any address: the same answer, and no membership until it uses the emailed link', async () => {
    const colleague = await signupUser(server.api);
    const invited = await ownerApi().post(membersPath(), { email: colleague.email.toUpperCase(), role: 'ADMIN' });
    const unknown = await ownerApi().post(membersPath(), { email: `nobody-${Date.now()}@example.test`, role: 'ADMIN' });
    assert.equal(invited.status, 201, invited.text);
    assert.equal(invited.body.status, 'invited');
    assert.equal(invited.body.member, undefined, 'no user id in the answer');
    assert.equal(invited.body.invitation.email, colleague.email);
    assert.equal(invited.body.invitation.role, 'ADMIN');
    assert.equal(invited.body.invitation.invitedBy, owner.userId);
    assert.deepEqual(shapeOf(invited.body), shapeOf(unknown.body));

    // Nothing joined yet: the project is neither listed for the colleague nor open to them.
    assert.deepEqual(await server.sql('SELECT role FROM memberships WHERE project_id = $1 AND user_id = $2', [owner.project.id, colleague.id]), []);
    assert.deepEqual((await server.api.get('/users/@me/projects', { cookie: colleague.cookie })).body, []);
    const closed = await asMember(server.api, colleague.cookie, owner.project.id).get('/contacts');
    assert.equal(closed.status, 403, closed.text);
    assert.equal(closed.body.error.message, 'You are not a member of this project');
    const pending = await ownerApi().get(membersPath());
    assert.deepEqual(
      pending.body.members.map((m: { userId: string }) => m.userId),
      [owner.userId],
    );
    assert.ok(pending.body.invitations.some((i: { email: string; role: string }) => i.email === colleague.email && i.role === 'ADMIN'));

    assert.deepEqual(await acceptMailed(colleague), { projectId: owner.project.id, role: 'ADMIN' });
    const list = await ownerApi().get(membersPath());
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(
      list.body.members.map((m: { userId: string; role: string }) => [m.userId, m.role]),
      [
        [owner.userId, 'OWNER'],
        [colleague.id, 'ADMIN'],
      ],
    );
    assert.ok(list.body.members.every((m: { email: string; createdAt: string }) => m.email.includes('@') && !Number.isNaN(Date.parse(m.createdAt))));
    assert.ok(!list.body.invitations.some((i: { email: string }) => i.email === colleague.email), 'no longer pending');

    // The colleague now sees the project with their role.
    const projects = await server.api.get('/users/@me/projects', { cookie: colleague.cookie });
    assert.deepEqual(
      projects.body.map((p: { id: string; role: string }) => [p.id, p.role]),
      [[owner.project.id, 'ADMIN']],
    );

    // Inviting a member again: 409 (the caller can list the members anyway), and no email goes out.
    const again = await ownerApi().post(membersPath(), { email: colleague.email });
    assert.equal(again.status, 409, again.text);
    assert.equal(again.body.error.code, 'CONFLICT');
  });

  test('an address someone signed up with first gets nothing: only the inbox owner, through the emailed link, joins', async () => {
    const address = `new.hire-${Date.now()}@corp.test`;
    const squatter = await signupUser(server.api, address);
    const invited = await ownerApi().post(membersPath(), { email: address, role: 'ADMIN' });
    assert.equal(invited.status, 201, invited.text);
    assert.equal(invited.body.status, 'invited');
    assert.deepEqual((await server.api.get('/users/@me/projects', { cookie: squatter.cookie })).body, []);
    const contacts = await asMember(server.api, squatter.cookie, owner.project.id).get('/contacts');
    assert.equal(contacts.status, 403, contacts.text);
    assert.equal(contacts.body.error.code, 'FORBIDDEN');
    assert.equal((await server.api.post(`/users/@me/projects/${owner.project.id}/regenerate-keys`, undefined, { cookie: squatter.cookie })).status, 404);

    // The real owner of the inbox takes the account back with a reset (which ends the squatter's
    // sessions) and joins with the invitation only they received.
    await server.api.post('/auth/request-password-reset', { email: address });
    const reset = /reset-password\?token=([\w.-]+)/.exec(String((await waitForMail(sink, address, 'Reset your Herald password')).parsed.html));
    assert.ok(reset, 'the reset mail carries a link');
    assert.equal((await server.api.post('/auth/reset-password', { token: reset[1], password: 'the real new hire' })).status, 200);
    assert.equal((await server.api.get('/users/@me', { cookie: squatter.cookie })).status, 401);
    const login = await server.api.post('/auth/login', { email: address, password: 'the real new hire' });
    assert.equal(login.status, 200, login.text);
    const newHire = { email: address, cookie: (login.headers.get('set-cookie') ?? '').split(';')[0] };
    assert.deepEqual(await acceptMailed(newHire), { projectId: owner.project.id, role: 'ADMIN' });
  });

  test('role defaults to MEMBER; PATCH changes it; a member may remove themselves', async () => {
    const u = await signupUser(server.api);
    const invited = await ownerApi().post(membersPath(), { email: u.email });
    assert.equal(invited.body.invitation.role, 'MEMBER');
    assert.equal((await acceptMailed(u)).role, 'MEMBER');
    const promoted = await ownerApi().patch(`${membersPath()}/${u.id}`, { role: 'ADMIN' });
    assert.equal(promoted.status, 200, promoted.text);
    assert.equal(promoted.body.role, 'ADMIN');
    await ownerApi().patch(`${membersPath()}/${u.id}`, { role: 'MEMBER' });

    const other = await signupUser(server.api);
    await ownerApi().post(membersPath(), { email: other.email });
    await acceptMailed(other);
    const removeOther = await server.api.delete(`${membersPath()}/${other.id}`, { cookie: u.cookie });
    assert.equal(removeOther.status, 403, removeOther.text);
    assert.equal(removeOther.body.error.code, 'FORBIDDEN');

    const leave = await server.api.delete(`${membersPath()}/${u.id}`, { cookie: u.cookie });
    assert.equal(leave.status, 204, leave.text);
    const after = await server.api.get(membersPath(), { cookie: u.cookie });
    assert.equal(after.status, 404, 'a former member no longer sees the project');
  });

  test('an ADMIN removed or demoted takes back the invitations they sent; the others stay', async () => {
    const p = await bootstrap(server.api, 'Admins project');
    const path = `/projects/${p.project.id}/members`;
    const ownerP = server.api.as({ cookie: p.cookie });
    const [removed, demoted] = [await signupUser(server.api), await signupUser(server.api)];
    for (const admin of [removed, demoted]) {
      assert.equal((await ownerP.post(path, { email: admin.email, role: 'ADMIN' })).status, 201);
      await acceptMailed(admin, 'Admins project');
    }
    const sent: Record<string, string> = {};
    for (const [by, email] of [
      [removed.cookie, `by-removed-${Date.now()}@example.test`],
      [demoted.cookie, `by-demoted-${Date.now()}@example.test`],
      [p.cookie, `by-owner-${Date.now()}@example.test`],
    ]) {
      const invited = await server.api.post(path, { email, role: 'ADMIN' }, { cookie: by });
      assert.equal(invited.status, 201, invited.text);
      sent[email] = invitationToken(await waitForMail(sink, email, 'invited to Admins project'));
    }
    assert.equal((await ownerP.delete(`${path}/${removed.id}`)).status, 204);
    assert.equal((await ownerP.patch(`${path}/${demoted.id}`, { role: 'MEMBER' })).status, 200);

    const pending = (await ownerP.get(path)).body.invitations.map((i: { email: string }) => i.email);
    assert.deepEqual(
      pending,
      Object.keys(sent).filter((e) => e.startsWith('by-owner-')),
    );
    for (const [email, token] of Object.entries(sent)) {
      const invitee = await signupUser(server.api, email);
      const accepted = await server.api.post('/invitations/accept', { token }, { cookie: invitee.cookie });
      if (email.startsWith('by-owner-')) assert.deepEqual([accepted.status, accepted.body.role], [200, 'ADMIN'], accepted.text);
      else assert.equal(accepted.status, 400, `${email}: ${accepted.text}`);
    }
  });

  test('the OWNER can be neither demoted nor removed, even by an ADMIN', async () => {
    const admin = await signupUser(server.api);
    await ownerApi().post(membersPath(), { email: admin.email, role: 'ADMIN' });
    await acceptMailed(admin);
    const demote = await server.api.patch(`${membersPath()}/${owner.userId}`, { role: 'MEMBER' }, { cookie: admin.cookie });
    assert.equal(demote.status, 403, demote.text);
    assert.equal(demote.body.error.code, 'FORBIDDEN');
    const remove = await server.api.delete(`${membersPath()}/${owner.userId}`, { cookie: admin.cookie });
    assert.equal(remove.status, 403, remove.text);
    const selfRemove = await ownerApi().delete(`${membersPath()}/${owner.userId}`);
    assert.equal(selfRemove.status, 403, selfRemove.text);
    const rows = await server.sql(`SELECT role FROM memberships WHERE project_id = $1 AND user_id = $2`, [owner.project.id, owner.userId]);
    assert.deepEqual(rows, [{ role: 'OWNER' }]);
  });

  test('the last ADMIN-or-OWNER cannot be removed', async () => {
    // A project whose owner account is gone keeps its one ADMIN.
    const founder = await bootstrap(server.api, 'Orphan');
    const admin = await signupUser(server.api);
    await server.api.post(`/projects/${founder.project.id}/members`, { email: admin.email, role: 'ADMIN' }, { cookie: founder.cookie });
    await acceptMailed(admin, 'Orphan');
    await server.sql('DELETE FROM users WHERE id = $1', [founder.userId]);
    const res = await server.api.delete(`/projects/${founder.project.id}/members/${admin.id}`, { cookie: admin.cookie });
    assert.equal(res.status, 409, res.text);
    assert.equal(res.body.error.code, 'CONFLICT');
  });

  test('bad input: invalid email, role OWNER, unknown member', async () => {
    const bad = await ownerApi().post(membersPath(), { email: 'not-an-email' });
    assert.equal(bad.status, 422, bad.text);
    assert.equal(bad.body.error.errors[0].field, 'email');
    const asOwner = await ownerApi().post(membersPath(), { email: 'someone@example.test', role: 'OWNER' });
    assert.equal(asOwner.status, 422, asOwner.text);
    assert.equal(asOwner.body.error.errors[0].field, 'role');
    const patchOwner = await ownerApi().patch(`${membersPath()}/${owner.userId}`, { role: 'OWNER' });
    assert.equal(patchOwner.status, 422, patchOwner.text);
    const unknown = await ownerApi().patch(`${membersPath()}/usr_nobody`, { role: 'ADMIN' });
    assert.equal(unknown.status, 404, unknown.text);
    assert.equal(unknown.body.error.code, 'MEMBER_NOT_FOUND');
    const pending = await server.sql(`SELECT count(*)::int AS n FROM project_invitations WHERE email IN ('not-an-email', 'someone@example.test')`);
    assert.equal(pending[0].n, 0);
  });

  test('the secret key is refused on every member and invitation route (401), and changes nothing', async () => {
    const p = await bootstrap(server.api, 'Keyed team');
    const path = `/projects/${p.project.id}/members`;
    const colleague = await signupUser(server.api);
    const byOwner = await server.api.post(path, { email: colleague.email, role: 'MEMBER' }, { cookie: p.cookie });
    assert.equal(byOwner.status, 201, byOwner.text);
    await acceptMailed(colleague, 'Keyed team');
    const pending = await server.api.post(path, { email: `pending-${Date.now()}@example.test` }, { cookie: p.cookie });
    const before = await server.api.get(path, { cookie: p.cookie });

    const attacker = `attacker-${Date.now()}@x.test`;
    const calls = [
      p.sk.get(path),
      p.sk.post(path, { email: attacker, role: 'ADMIN' }),
      p.sk.patch(`${path}/${colleague.id}`, { role: 'ADMIN' }),
      p.sk.delete(`${path}/${colleague.id}`),
      p.sk.delete(`/projects/${p.project.id}/invitations/${pending.body.invitation.id}`),
    ];
    for (const res of await Promise.all(calls)) {
      assert.equal(res.status, 401, res.text);
      assert.equal(res.body.success, false);
      assert.equal(res.body.error.code, 'UNAUTHORIZED');
      assert.match(res.body.error.message, /needs a dashboard session/);
      assert.equal(res.body.members, undefined, 'no member addresses');
    }
    assert.deepEqual((await server.api.get(path, { cookie: p.cookie })).body, before.body);
    assert.deepEqual(await server.sql('SELECT 1 FROM project_invitations WHERE email = $1', [attacker]), []);
  });

  test('a non-member gets 404 on the members list', async () => {
    const stranger = await signupUser(server.api);
    const res = await server.api.get(membersPath(), { cookie: stranger.cookie });
    assert.equal(res.status, 404, res.text);
    assert.equal(res.body.error.code, 'PROJECT_NOT_FOUND');
  });
});

describe('invitations', () => {
  test('an address without an account gets a signed single-use link that adds them after signup', async () => {
    const email = `invitee-${Date.now()}@example.test`;
    const res = await ownerApi().post(membersPath(), { email, role: 'ADMIN' });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.body.status, 'invited');
    assert.equal(res.body.invitation.email, email);
    const list = await ownerApi().get(membersPath());
    assert.ok(list.body.invitations.some((i: { email: string; role: string }) => i.email === email && i.role === 'ADMIN'));

    const mail = await waitForMail(sink, email, 'invited to Team project');
    const token = invitationToken(mail);

    const newcomer = await signupUser(server.api, email);
    const accepted = await server.api.post('/invitations/accept', { token }, { cookie: newcomer.cookie });
    assert.equal(accepted.status, 200, accepted.text);
    assert.deepEqual(accepted.body, { projectId: owner.project.id, role: 'ADMIN' });
    const members = await ownerApi().get(membersPath());
    assert.ok(members.body.members.some((m: { userId: string; role: string }) => m.userId === newcomer.id && m.role === 'ADMIN'));
    assert.ok(!members.body.invitations.some((i: { email: string }) => i.email === email), 'no longer pending');

    // Used twice: refused.
    const twice = await server.api.post('/invitations/accept', { token }, { cookie: newcomer.cookie });
    assert.equal(twice.status, 400, twice.text);
    assert.equal(twice.body.error.code, 'BAD_REQUEST');
  });

  test('existing accounts count against the 20 invitation emails an hour, with the same answer as unknown addresses', async () => {
    const team = await bootstrap(server.api, 'Probe team');
    const invite = (email: string) => server.api.as({ cookie: team.cookie }).post(`/projects/${team.project.id}/members`, { email });
    const accounts = await Promise.all(Array.from({ length: 12 }, () => signupUser(server.api)));
    // Alternating: an address with an account, one without; 24 in all, in this order.
    const guesses = accounts.flatMap((a, i) => [a.email, `unknown-${i}@example.test`]);
    const answers = [];
    for (const email of guesses) answers.push(await invite(email));
    assert.deepEqual(
      answers.map((r) => `${r.status} ${r.body.status ?? r.body.error.code}`),
      [...Array(20).fill('201 invited'), ...Array(4).fill('429 RATE_LIMIT_EXCEEDED')],
    );
    const shapes = new Set(answers.slice(0, 20).map((r) => JSON.stringify(shapeOf(r.body))));
    assert.equal(shapes.size, 1, [...shapes].join('\n'));
    const joined = await server.sql('SELECT count(*)::int AS n FROM memberships WHERE project_id = $1', [team.project.id]);
    assert.equal(joined[0].n, 1, 'only the owner');
  });

  test('a project sends at most 20 invitation emails an hour, and keeps at most 50 pending invitations', async () => {
    const team = await bootstrap(server.api, 'Bounded team');
    const invite = (email: string) => server.api.as({ cookie: team.cookie }).post(`/projects/${team.project.id}/members`, { email });
    const answers = await Promise.all(Array.from({ length: 24 }, (_, i) => invite(`bounded-${i}@example.test`)));
    assert.deepEqual(answers.map((r) => r.status).sort(), [...Array(20).fill(201), ...Array(4).fill(429)]);
    const refused = answers.find((r) => r.status === 429)!;
    assert.equal(refused.body.error.code, 'RATE_LIMIT_EXCEEDED');
    assert.ok(Number(refused.headers.get('retry-after')) > 3000, refused.headers.get('retry-after') ?? 'no Retry-After');
    const listed = await server.api.as({ cookie: team.cookie }).get(`/projects/${team.project.id}/members`);
    assert.equal(listed.body.invitations.length, 20, 'a refused invitation is not stored');
    await waitForMail(sink, 'bounded-0@example.test', 'invited to Bounded team');

    // The pending cap, with the hourly budget left aside: 50 pending rows in another project.
    const full = await bootstrap(server.api, 'Full team');
    await server.sql(
      `INSERT INTO project_invitations (id, project_id, email, role, created_at, expires_at)
       SELECT gen_random_uuid(), $1, 'pending-' || g || '@example.test', 'MEMBER', now(), now() + interval '7 days' FROM generate_series(1, 50) AS g`,
      [full.project.id],
    );
    const fullApi = server.api.as({ cookie: full.cookie });
    const over = await fullApi.post(`/projects/${full.project.id}/members`, { email: 'one-more@example.test' });
    assert.equal(over.status, 403, over.text);
    assert.deepEqual(over.body.error.details, { limit: 50 });
    const again = await fullApi.post(`/projects/${full.project.id}/members`, { email: 'pending-7@example.test' });
    assert.equal(again.status, 201, 'inviting a pending address again replaces its invitation');
  });

  test('a link used by another account is refused and stays usable by the invitee', async () => {
    const email = `second-${Date.now()}@example.test`;
    await ownerApi().post(membersPath(), { email });
    const token = invitationToken(await waitForMail(sink, email, 'invited'));
    const intruder = await signupUser(server.api);
    const stolen = await server.api.post('/invitations/accept', { token }, { cookie: intruder.cookie });
    assert.equal(stolen.status, 403, stolen.text);
    assert.equal(stolen.body.error.code, 'FORBIDDEN');
    const rows = await server.sql('SELECT 1 FROM memberships WHERE user_id = $1', [intruder.id]);
    assert.equal(rows.length, 0);

    const invitee = await signupUser(server.api, email);
    const ok = await server.api.post('/invitations/accept', { token }, { cookie: invitee.cookie });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.body.role, 'MEMBER');
  });

  test('a link after 7 days, a revoked one and a forged one are refused', async () => {
    const late = `late-${Date.now()}@example.test`;
    await ownerApi().post(membersPath(), { email: late });
    const lateToken = invitationToken(await waitForMail(sink, late, 'invited'));
    const lateUser = await signupUser(server.api, late);
    offsetMs = 7 * 24 * 3600 * 1000 + 60_000;
    try {
      const expired = await server.api.post('/invitations/accept', { token: lateToken }, { cookie: lateUser.cookie });
      assert.equal(expired.status, 400, expired.text);
      const list = await ownerApi().get(membersPath());
      assert.ok(!list.body.invitations.some((i: { email: string }) => i.email === late), 'expired invitations are not pending');
    } finally {
      offsetMs = 0;
    }

    const revoked = `revoked-${Date.now()}@example.test`;
    const inv = await ownerApi().post(membersPath(), { email: revoked });
    const revokedToken = invitationToken(await waitForMail(sink, revoked, 'invited'));
    const del = await ownerApi().delete(`/projects/${owner.project.id}/invitations/${inv.body.invitation.id}`);
    assert.equal(del.status, 204, del.text);
    const revokedUser = await signupUser(server.api, revoked);
    const refused = await server.api.post('/invitations/accept', { token: revokedToken }, { cookie: revokedUser.cookie });
    assert.equal(refused.status, 400, refused.text);

    const forged = await server.api.post('/invitations/accept', { token: `${revokedToken.slice(0, -4)}AAAA` }, { cookie: revokedUser.cookie });
    assert.equal(forged.status, 400, forged.text);
    const memberships = await server.sql('SELECT 1 FROM memberships WHERE user_id = ANY($1)', [[lateUser.id, revokedUser.id]]);
    assert.equal(memberships.length, 0);
  });

  test('the emailed link accepts for a signed-in browser', async () => {
    const email = `browser-${Date.now()}@example.test`;
    await ownerApi().post(membersPath(), { email });
    const token = invitationToken(await waitForMail(sink, email, 'invited'));
    const anonymous = await server.api.get(`/invitations/accept?token=${token}`);
    assert.equal(anonymous.status, 200);
    assert.match(anonymous.text, /Log in, or create an account, with the invited address[^]*href="\/app\/signup\?next=%2Finvitation%3Ftoken%3D/);
    const user = await signupUser(server.api, email);
    const page = await server.api.get(`/invitations/accept?token=${token}`, { cookie: user.cookie });
    assert.equal(page.status, 200, page.text);
    assert.match(page.text, /You joined the project/);
    const members = await asMember(server.api, user.cookie, owner.project.id).get('/contacts');
    assert.equal(members.status, 200, members.text);
  });
});
