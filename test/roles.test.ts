import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { verifyDomain } from './helpers/domains.ts';
import type { Api } from './helpers/http.ts';
import { type MailEnv, startMailEnv } from './helpers/mail.ts';
import { joinWithInvitation } from './helpers/invitations.ts';
import { asMember, signupUser } from './helpers/team.ts';

/**
 * The role matrix: every mutating dashboard route, called with a session cookie as MEMBER, ADMIN
 * and OWNER. A refused call is 403 FORBIDDEN; an allowed one gets the route's own outcome.
 */

type Role = 'MEMBER' | 'ADMIN' | 'OWNER';
type Call = { method: string; path: string; body?: unknown; raw?: FormData };
type Row = { name: string; member: boolean; call: (role: Role) => Call | Promise<Call>; ok: number };

let env: MailEnv;
let owner: Bootstrapped;
const users: Partial<Record<Role, { id: string; cookie: string }>> = {};
const FROM = 'hello@roles.example.test';

before(async () => {
  env = await startMailEnv();
  owner = await bootstrap(env.server.api, 'Roles');
  await verifyDomain(owner.sk, env.dns, 'roles.example.test');
  users.OWNER = { id: owner.userId, cookie: owner.cookie };
  for (const role of ['ADMIN', 'MEMBER'] as const) {
    const u = await signupUser(env.server.api);
    await joinWithInvitation(
      env.server,
      await env.server.api.post(`/projects/${owner.project.id}/members`, { email: u.email, role }, { cookie: owner.cookie }),
      u.cookie,
    );
    users[role] = u;
  }
});
after(async () => env?.stop());

const p = () => owner.project.id;
const lower = (r: Role) => r.toLowerCase();
/** Setup calls go through the owner's session (the matrix rotates the keys). */
const ownerApi = () => asMember(env.server.api, owner.cookie, owner.project.id);
const create = async (path: string, body: unknown) => {
  const res = await ownerApi().post(path, body);
  assert.ok(res.status === 201 || res.status === 200, res.text);
  return (res.body.success === true ? res.body.data : res.body) as { id: string };
};
const template = (name: string) => ({ name, subject: 'Hi', body: '<p>Hi</p>', from: FROM });
const campaign = (name: string) => ({ name, subject: 'Hi', body: '<p>Hi</p>', from: FROM });

const rows: Row[] = [
  // MEMBER works with contacts, templates, segments, campaigns, workflows, events and uploads.
  { name: 'create contact', member: true, ok: 201, call: (r) => ({ method: 'POST', path: '/contacts', body: { email: `${lower(r)}@contacts.test` } }) },
  {
    name: 'update contact',
    member: true,
    ok: 200,
    call: async (r) => ({
      method: 'PATCH',
      path: `/contacts/${(await create('/contacts', { email: `upd-${lower(r)}@c.test` })).id}`,
      body: { data: { plan: r } },
    }),
  },
  {
    name: 'delete contact',
    member: true,
    ok: 204,
    call: async (r) => ({ method: 'DELETE', path: `/contacts/${(await create('/contacts', { email: `del-${lower(r)}@c.test` })).id}` }),
  },
  { name: 'lookup contacts', member: true, ok: 200, call: () => ({ method: 'POST', path: '/contacts/lookup', body: { emails: ['a@b.test'] } }) },
  {
    name: 'bulk unsubscribe',
    member: true,
    ok: 202,
    call: () => ({ method: 'POST', path: '/contacts/bulk-unsubscribe', body: { contactIds: ['cnt_unknown'] } }),
  },
  { name: 'create template', member: true, ok: 201, call: (r) => ({ method: 'POST', path: '/templates', body: template(`T ${r}`) }) },
  {
    name: 'update template',
    member: true,
    ok: 200,
    call: async (r) => ({ method: 'PATCH', path: `/templates/${(await create('/templates', template(`U ${r}`))).id}`, body: { name: `U2 ${r}` } }),
  },
  { name: 'create segment', member: true, ok: 201, call: (r) => ({ method: 'POST', path: '/segments', body: { name: `S ${r}`, type: 'STATIC' } }) },
  { name: 'create campaign', member: true, ok: 201, call: (r) => ({ method: 'POST', path: '/campaigns', body: campaign(`C ${r}`) }) },
  {
    name: 'delete campaign',
    member: true,
    ok: 204,
    call: async (r) => ({ method: 'DELETE', path: `/campaigns/${(await create('/campaigns', campaign(`D ${r}`))).id}` }),
  },
  {
    name: 'track event',
    member: true,
    ok: 200,
    call: (r) => ({ method: 'POST', path: '/events/track', body: { email: `ev-${lower(r)}@c.test`, event: 'demo' } }),
  },
  // ADMIN and OWNER only.
  { name: 'delete event name', member: false, ok: 204, call: (r) => ({ method: 'DELETE', path: `/events/unused-${lower(r)}` }) },
  { name: 'add domain', member: false, ok: 201, call: (r) => ({ method: 'POST', path: '/domains', body: { domain: `${lower(r)}.example.org` } }) },
  { name: 'delete domain', member: false, ok: 404, call: () => ({ method: 'DELETE', path: '/domains/0190a0a0-0000-7000-8000-000000000000' }) },
  { name: 'delete suppression', member: false, ok: 404, call: () => ({ method: 'DELETE', path: '/suppressions/nobody@x.test' }) },
  { name: 'update project', member: false, ok: 200, call: (r) => ({ method: 'PATCH', path: `/users/@me/projects/${p()}`, body: { name: `Roles ${r}` } }) },
  { name: 'rotate keys', member: false, ok: 200, call: () => ({ method: 'POST', path: `/users/@me/projects/${p()}/regenerate-keys` }) },
  { name: 'invite', member: false, ok: 201, call: (r) => ({ method: 'POST', path: `/projects/${p()}/members`, body: { email: `inv-${lower(r)}@x.test` } }) },
  {
    name: 'change role',
    member: false,
    ok: 200,
    call: () => ({ method: 'PATCH', path: `/projects/${p()}/members/${users.MEMBER!.id}`, body: { role: 'MEMBER' } }),
  },
  {
    name: 'remove another member',
    member: false,
    ok: 204,
    call: async (r) => {
      const u = await signupUser(env.server.api);
      await joinWithInvitation(
        env.server,
        await ownerApi().post(`/projects/${p()}/members`, { email: u.email, role: r === 'MEMBER' ? 'MEMBER' : 'ADMIN' }),
        u.cookie,
      );
      return { method: 'DELETE', path: `/projects/${p()}/members/${u.id}` };
    },
  },
  {
    name: 'revoke invitation',
    member: false,
    ok: 404,
    call: () => ({ method: 'DELETE', path: `/projects/${p()}/invitations/0190a0a0-0000-7000-8000-000000000000` }),
  },
  {
    name: 'set billing limits',
    member: false,
    ok: 200,
    call: () => ({ method: 'PUT', path: `/users/@me/projects/${p()}/billing-limits`, body: { transactional: 1000 } }),
  },
  // Without STRIPE_SECRET_KEY the payment routes answer 404 BILLING_DISABLED, but only to those allowed to call them.
  { name: 'checkout', member: false, ok: 404, call: () => ({ method: 'POST', path: `/users/@me/projects/${p()}/checkout` }) },
  { name: 'billing portal', member: false, ok: 404, call: () => ({ method: 'POST', path: `/users/@me/projects/${p()}/billing-portal` }) },
  {
    name: 'delete project',
    member: false,
    ok: 204,
    call: async () => {
      const created = await env.server.api.post('/users/@me/projects', { name: 'Doomed' }, { cookie: owner.cookie });
      for (const role of ['ADMIN', 'MEMBER'] as const) {
        const email = (await env.server.api.get('/users/@me', { cookie: users[role]!.cookie })).body.email;
        const invited = await env.server.api.post(`/projects/${created.body.id}/members`, { email, role }, { cookie: owner.cookie });
        await joinWithInvitation(env.server, invited, users[role]!.cookie);
      }
      return { method: 'DELETE', path: `/users/@me/projects/${created.body.id}` };
    },
  },
  // Last: it empties the project the rows above use.
  { name: 'reset project', member: false, ok: 200, call: () => ({ method: 'POST', path: `/users/@me/projects/${p()}/reset` }) },
];

test('role matrix: every mutating dashboard route as MEMBER, ADMIN and OWNER', async () => {
  const failures: string[] = [];
  for (const row of rows) {
    for (const role of ['MEMBER', 'ADMIN', 'OWNER'] as const) {
      const api: Api = asMember(env.server.api, users[role]!.cookie, p());
      const call = await row.call(role);
      const res = await api.request(call.method, call.path, { body: call.body });
      const allowed = role !== 'MEMBER' || row.member;
      const want = allowed ? row.ok : 403;
      if (res.status !== want) failures.push(`${row.name} as ${role}: ${res.status}, wanted ${want} (${res.text.slice(0, 200)})`);
      else if (!allowed && res.body.error.code !== 'FORBIDDEN') failures.push(`${row.name} as ${role}: code ${res.body.error.code}`);
    }
  }
  assert.deepEqual(failures, []);
});

test('a MEMBER refused changes nothing; the API key acts as ADMIN', async () => {
  const member = asMember(env.server.api, users.MEMBER!.cookie, p());
  const before = await env.server.sql<{ secret_key_hash: string; name: string }>('SELECT secret_key_hash, name FROM projects WHERE id = $1', [p()]);
  const rotate = await member.post(`/users/@me/projects/${p()}/regenerate-keys`);
  assert.equal(rotate.status, 403);
  const domain = await member.post('/domains', { domain: 'member-only.example.org' });
  assert.equal(domain.status, 403);
  const invite = await member.post(`/projects/${p()}/members`, { email: 'member-invite@x.test' });
  assert.equal(invite.status, 403);
  const afterRows = await env.server.sql('SELECT secret_key_hash, name FROM projects WHERE id = $1', [p()]);
  assert.deepEqual(afterRows, before);
  assert.equal((await env.server.sql(`SELECT 1 FROM domains WHERE domain = 'member-only.example.org'`)).length, 0);
  assert.equal((await env.server.sql(`SELECT 1 FROM project_invitations WHERE email = 'member-invite@x.test'`)).length, 0);

  // Keys are stored hashed: the owner rotates to learn the current secret key.
  const rotated = await ownerApi().post(`/users/@me/projects/${p()}/regenerate-keys`);
  assert.equal(rotated.status, 200, rotated.text);
  const secret_key: string = rotated.body.secretKey;
  const byKey = await env.server.api.post('/domains', { domain: 'by-key.example.org' }, { key: secret_key });
  assert.equal(byKey.status, 201, byKey.text);
});
