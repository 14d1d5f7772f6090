import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.ts';
import { type Bootstrapped, bootstrap } from '../helpers/bootstrap.ts';
import { verifyDomain } from '../helpers/domains.ts';
import type { Api } from '../helpers/http.ts';
import { routeTable } from '../helpers/routes.ts';
import { type MailEnv, startMailEnv, waitForStatus } from '../helpers/mail.ts';
import { joinWithInvitation } from '../helpers/invitations.ts';
import { asMember, signupUser } from '../helpers/team.ts';

/**
 * The isolation property of the fuzz suite (issue 14): a generated sequence of creates in project
 * B, then every route of Fastify's route table replayed by project A — with A's keys and with
 * the cookie of a MEMBER of A — with B's ids in the path, the query and the body. No answer
 * carries B's data (every text B stored holds a marker A never sends), and B, read through its own
 * key before and after, is unchanged. FUZZ_RUNS=<n> runs longer.
 */

const RUNS = Number(process.env.FUZZ_RUNS ?? 8);
const MARK = `zzB${randomBytes(6).toString('hex')}`;
const DOMAIN_B = 'b-iso.example.test';
const FROM_B = `hello@${DOMAIN_B}`;

let env: MailEnv;
let app: FastifyInstance;
let a: Bootstrapped;
let b: Bootstrapped;
let member: { id: string; email: string; cookie: string };
/** Every id of B's resources, by kind, as the API shows them. */
const ids: Record<string, string[]> = {};
const addId = (kind: string, id: unknown) => {
  assert.equal(typeof id, 'string', `${kind} id`);
  (ids[kind] ??= []).push(id as string);
};
const bodyOf = (res: { body: { success?: boolean; data?: unknown } }) => (res.body.success === true ? res.body.data : res.body) as Record<string, unknown>;

type Create = { kind: 'contact' | 'template' | 'segment' | 'campaign' | 'workflow' | 'event' | 'send'; n: number };

/** One create in B, through B's key; records the ids it makes. */
async function createInB(c: Create): Promise<void> {
  const sk = b.sk;
  const email = `c${c.n}@people-b.example.org`;
  switch (c.kind) {
    case 'contact': {
      const res = await sk.post('/contacts', { email, data: { secret: `${MARK} contact ${c.n}`, plan: 'pro' } });
      assert.ok(res.status === 200 || res.status === 201, res.text);
      addId('contact', bodyOf(res).id);
      addId('contactEmail', email);
      return;
    }
    case 'template': {
      const res = await sk.post('/templates', {
        name: `T ${MARK} ${c.n}`,
        subject: `S ${MARK}`,
        body: `<p>${MARK} {{email}}</p>`,
        from: FROM_B,
        type: 'MARKETING',
      });
      assert.equal(res.status, 201, res.text);
      addId('template', bodyOf(res).id);
      return;
    }
    case 'segment': {
      const res = await sk.post('/segments', { name: `Seg ${MARK} ${c.n}`, description: MARK, type: 'STATIC' });
      assert.equal(res.status, 201, res.text);
      addId('segment', bodyOf(res).id);
      return;
    }
    case 'campaign': {
      const res = await sk.post('/campaigns', { name: `C ${MARK} ${c.n}`, subject: `S ${MARK}`, body: `<p>${MARK}</p>`, from: FROM_B });
      assert.equal(res.status, 201, res.text);
      addId('campaign', bodyOf(res).id);
      return;
    }
    case 'workflow': {
      const res = await sk.post('/workflows', { name: `W ${MARK} ${c.n}`, description: MARK, eventName: `iso.event${c.n}` });
      assert.equal(res.status, 201, res.text);
      const wf = bodyOf(res) as { id: string; steps: { id: string; type: string }[] };
      addId('workflow', wf.id);
      for (const s of wf.steps) addId('step', s.id);
      const delay = await sk.post(`/workflows/${wf.id}/steps`, { type: 'DELAY', config: { amount: 2, unit: 'days' } });
      assert.equal(delay.status, 201, delay.text);
      addId('step', bodyOf(delay).id);
      const link = await sk.post(`/workflows/${wf.id}/transitions`, { fromStepId: wf.steps[0].id, toStepId: bodyOf(delay).id });
      assert.equal(link.status, 201, link.text);
      addId('transition', bodyOf(link).id);
      const enabled = await sk.patch(`/workflows/${wf.id}`, { enabled: true });
      assert.equal(enabled.status, 200, enabled.text);
      const contact = await sk.post('/contacts', { email });
      assert.ok(contact.status === 200 || contact.status === 201, contact.text);
      addId('contact', bodyOf(contact).id);
      const started = await sk.post(`/workflows/${wf.id}/executions`, { email, context: { note: `${MARK} context` } });
      assert.equal(started.status, 201, started.text);
      const execution = bodyOf(started).id as string;
      addId('execution', execution);
      addId('contactEmail', email);
      // Settled before the snapshot: the execution waits on its 2-day DELAY.
      for (let tries = 0; (await sk.get(`/workflows/${wf.id}/executions/${execution}`)).body.status !== 'WAITING'; tries++) {
        assert.ok(tries < 200, 'the execution reached its DELAY');
        await new Promise((r) => setTimeout(r, 50));
      }
      return;
    }
    case 'event': {
      const res = await b.pk.post('/v1/track', { email, event: `iso.tracked${c.n % 3}`, data: { note: `${MARK} event` } });
      assert.equal(res.status, 200, res.text);
      addId('contactEmail', email);
      addId('eventName', `iso.tracked${c.n % 3}`);
      return;
    }
    case 'send': {
      const res = await sk.post('/v1/send', { to: email, from: FROM_B, subject: `S ${MARK}`, body: `<p>${MARK}</p>`, data: { secret: `${MARK} send` } });
      assert.equal(res.status, 200, res.text);
      const [item] = bodyOf(res).emails as { email: string; contact: { id: string } }[];
      addId('email', item.email);
      addId('contact', item.contact.id);
      await waitForStatus(sk, item.email, ['SENT']);
      return;
    }
  }
}

/** B as B sees it: every resource by id and every list, through B's key and B's owner cookie. */
async function snapshotB(): Promise<Record<string, unknown>> {
  const owner = asMember(env.server.api, b.cookie, b.project.id);
  const out: Record<string, unknown> = {};
  const read = async (api: Api, path: string) => {
    const res = await api.get(path);
    out[path] = { status: res.status, body: res.body };
  };
  const byId: [string, (id: string) => string][] = [
    ['contact', (id) => `/contacts/${id}`],
    ['template', (id) => `/templates/${id}`],
    ['segment', (id) => `/segments/${id}`],
    ['campaign', (id) => `/campaigns/${id}`],
    ['workflow', (id) => `/workflows/${id}`],
    ['email', (id) => `/emails/${id}`],
  ];
  for (const [kind, path] of byId) for (const id of ids[kind] ?? []) await read(b.sk, path(id));
  for (const workflow of ids.workflow ?? []) {
    const list = await b.sk.get(`/workflows/${workflow}/executions`);
    out[`executions of ${workflow}`] = list.body;
    for (const x of (list.body.data ?? []) as { id: string }[]) await read(b.sk, `/workflows/${workflow}/executions/${x.id}`);
  }
  for (const path of [
    '/contacts?limit=100',
    '/templates',
    '/segments',
    '/campaigns',
    '/workflows',
    '/emails?limit=100',
    '/suppressions',
    '/contacts/fields',
    '/events?limit=100',
    '/events/names',
  ]) {
    await read(b.sk, path);
  }
  for (const path of ['/users/@me/projects', `/projects/${b.project.id}/members`, `/users/@me/projects/${b.project.id}/billing-limits`])
    await read(owner, path);
  return out;
}

before(async () => {
  env = await startMailEnv();
  b = await bootstrap(env.server.api, `B ${MARK}`);
  await verifyDomain(b.sk, env.dns, DOMAIN_B);
  a = await bootstrap(env.server.api, 'A');
  member = await signupUser(env.server.api);
  await joinWithInvitation(
    env.server,
    await env.server.api.post(`/projects/${a.project.id}/members`, { email: member.email, role: 'MEMBER' }, { cookie: a.cookie }),
    member.cookie,
  );
  app = await buildApp(env.server.ctx);
  await app.ready();

  // A generated sequence of creates in B (each kind at least once).
  const kinds: Create['kind'][] = ['contact', 'template', 'segment', 'campaign', 'workflow', 'event', 'send'];
  const [extra] = fc.sample(fc.array(fc.constantFrom(...kinds), { minLength: 3, maxLength: 8 }), 1);
  for (const [n, kind] of [...kinds, ...extra].entries()) await createInB({ kind, n });
  for (const field of ['secret', 'plan', 'note']) addId('field', field);
  const invited = await asMember(env.server.api, b.cookie, b.project.id).post(`/projects/${b.project.id}/members`, {
    email: `invitee-${MARK}@example.test`,
    role: 'MEMBER',
  });
  assert.equal(invited.status, 201, invited.text);
  addId('invitation', invited.body.invitation.id);
  addId('project', b.project.id);
  addId('user', b.userId);
  const domains = await asMember(env.server.api, b.cookie, b.project.id).get(`/domains/project/${b.project.id}`);
  for (const d of (Array.isArray(domains.body) ? domains.body : (domains.body.data ?? [])) as { id: string }[]) addId('domain', d.id);
});
after(async () => {
  await app?.close();
  await env?.stop();
});

/** The kinds of B's ids a path parameter takes, from the path segment before it. */
const KIND_OF_SEGMENT: Record<string, string[]> = {
  contacts: ['contact', 'contactEmail'],
  contact: ['contact'],
  templates: ['template'],
  segments: ['segment'],
  campaigns: ['campaign'],
  workflows: ['workflow'],
  steps: ['step'],
  transitions: ['transition'],
  emails: ['email'],
  projects: ['project'],
  project: ['project'],
  members: ['user'],
  invitations: ['invitation'],
  executions: ['execution'],
  domains: ['domain'],
  events: ['eventName'],
  suppressions: ['contactEmail'],
  fields: ['field'],
};

/** For each parameter of `path`: mostly B's ids of the kind the route takes, sometimes any of B's ids. */
function paramArbitraries(path: string, any: fc.Arbitrary<string>): fc.Arbitrary<string>[] {
  const segments = path.split('/');
  const out: fc.Arbitrary<string>[] = [];
  segments.forEach((seg, i) => {
    if (!seg.startsWith(':') && seg !== '*') return;
    const kinds = KIND_OF_SEGMENT[segments[i - 1]] ?? [];
    const matching = kinds.flatMap((k) => ids[k] ?? []);
    out.push(matching.length > 0 ? fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...matching) }, { weight: 1, arbitrary: any }) : any);
  });
  return out;
}

/** Routes that end A's own session (they take no ids of B): left out so the replay keeps its cookie. */
const SELF_ENDING = new Set(['POST /auth/logout-all', 'GET /auth/logout', 'POST /auth/change-password', 'POST /auth/reset-password']);

describe('isolation between projects', () => {
  test("every route replayed by project A with B's ids never answers with B's data nor changes B", async () => {
    const before = await snapshotB();
    assert.ok(JSON.stringify(before).includes(MARK), "B's snapshot holds its data");
    const routes = routeTable(app).filter(([m, p]) => !SELF_ENDING.has(`${m} ${p}`));
    const allIds = Object.values(ids).flat();
    const bId = fc.constantFrom(...allIds);
    // Bodies with B's ids in every field name an id-taking route may read.
    const idFields = [
      'id',
      'contactId',
      'contactIds',
      'ids',
      'templateId',
      'segmentId',
      'campaignId',
      'workflowId',
      'stepId',
      'fromStepId',
      'toStepId',
      'email',
      'emails',
      'projectId',
      'userId',
      'eventName',
      'to',
    ];
    const payload = fc.dictionary(fc.constantFrom(...idFields), fc.oneof(bId, fc.array(bId, { minLength: 1, maxLength: 3 })), { minKeys: 1, maxKeys: 5 });
    const q = fc.dictionary(
      fc.constantFrom('contactId', 'campaignId', 'segmentId', 'workflowId', 'templateId', 'email', 'search', 'status', 'projectId'),
      bId,
      { maxKeys: 3 },
    );
    const auths = [
      { authorization: `Bearer ${a.project.secretKey}` },
      { authorization: `Bearer ${a.project.publicKey}` },
      { cookie: member.cookie, 'x-project-id': a.project.id },
      // A member of A naming B's project: the cookie alone must not open B.
      { cookie: member.cookie, 'x-project-id': b.project.id },
    ];
    let leaks = 0;
    for (const [method, path] of routes) {
      await fc.assert(
        fc.asyncProperty(fc.tuple(...paramArbitraries(path, bId)), q, payload, fc.nat(auths.length - 1), async (params, query, body, auth) => {
          let i = 0;
          const url = path.replace(/:[A-Za-z]+|\*/g, () => encodeURIComponent(params[i++]));
          const qs = Object.entries(query)
            .map(([k, v]) => `${k}=${encodeURIComponent(v)}`)
            .join('&');
          const bodied = method !== 'GET' && method !== 'DELETE';
          const res = await app.inject({
            method: method as 'GET',
            url: qs ? `${url}?${qs}` : url,
            headers: { ...auths[auth], ...(bodied ? { 'content-type': 'application/json' } : {}) },
            ...(bodied ? { payload: JSON.stringify(body) } : {}),
          });
          const what = `${method} ${path} as ${['A secret key', 'A public key', 'A member', 'A member naming B'][auth]} → ${res.statusCode}`;
          assert.ok(res.statusCode < 500, `${what}: ${res.body.slice(0, 300)}`);
          if (res.body.includes(MARK)) leaks += 1;
          assert.ok(!res.body.includes(MARK), `${what} answered with B's data: ${res.body.slice(0, 300)}`);
        }),
        { numRuns: RUNS, endOnFailure: true },
      );
    }
    assert.equal(leaks, 0);
    const afterwards = await snapshotB();
    assert.deepEqual(afterwards, before, 'B is unchanged');
  });
});
