import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { verifyDomain } from './helpers/domains.ts';
import type { Api } from './helpers/http.ts';
import { type MailEnv, startMailEnv, waitForStatus } from './helpers/mail.ts';
import { joinWithInvitation } from './helpers/invitations.ts';
import { asMember, signupUser, waitForMail } from './helpers/team.ts';

let env: MailEnv;
before(async () => {
  env = await startMailEnv();
});
after(async () => env?.stop());

const DATA_TABLES = [
  'contacts',
  'events',
  'emails',
  'campaigns',
  'segments',
  'templates',
  'contact_fields',
  // The sent campaign's outcome summaries (analytics/outcome-rollups.ts).
  'campaign_outcomes',
  'campaign_outcome_slots',
  // Its recipient who unsubscribed after it (migration 0030).
  'campaign_unsubscribes',
] as const;

async function counts(projectId: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of [...DATA_TABLES, 'domains', 'memberships', 'projects']) {
    const col = t === 'projects' ? 'id' : 'project_id';
    const [row] = await env.server.sql<{ n: number }>(`SELECT count(*)::int AS n FROM ${t} WHERE ${col} = $1`, [projectId]);
    out[t] = row.n;
  }
  return out;
}

/** A project with a verified domain, contacts, a template, a segment, a sent email, a sent and a scheduled campaign, an event. */
async function populated(name: string): Promise<Bootstrapped & { domain: string }> {
  const b = await bootstrap(env.server.api, name);
  const domain = `${name.toLowerCase().replace(/\W/g, '')}.example.test`;
  await verifyDomain(b.sk, env.dns, domain);
  const from = `hello@${domain}`;
  for (const email of ['a@r.test', 'b@r.test']) assert.equal((await b.sk.post('/contacts', { email, subscribed: true, data: { plan: 'pro' } })).status, 201);
  assert.equal((await b.sk.post('/templates', { name: 'T', subject: 'S', body: '<p>B</p>', from })).status, 201);
  assert.equal((await b.sk.post('/segments', { name: 'Seg', type: 'STATIC' })).status, 201);
  assert.equal((await b.sk.post('/events/track', { email: 'a@r.test', event: 'signed_in' })).status, 200);
  const sent = await b.sk.post('/v1/send', { to: 'a@r.test', from, subject: 'Hi', body: '<p>Hi</p>' });
  assert.equal(sent.status, 200, sent.text);
  await waitForStatus(b.sk, sent.body.data.emails[0].email, ['SENT', 'DELIVERED']);
  const c = await b.sk.post('/campaigns', { name: 'Now', subject: 'News', body: '<p>News</p>', from });
  assert.equal((await b.sk.post(`/campaigns/${c.body.data.id}/send`, {})).status, 200);
  // Finished before anyone counts rows: a campaign still going out would change them.
  const deadline = Date.now() + 60_000;
  while ((await b.sk.get(`/campaigns/${c.body.data.id}`)).body.status !== 'SENT' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  const [a] = (await b.sk.get('/contacts?limit=10')).body.data.filter((x: { email: string }) => x.email === 'a@r.test');
  assert.equal((await b.sk.patch(`/contacts/${a.id}`, { subscribed: false })).status, 200);
  const later = await b.sk.post('/campaigns', { name: 'Later', subject: 'Later', body: '<p>Later</p>', from });
  const scheduled = await b.sk.post(`/campaigns/${later.body.data.id}/send`, { scheduledFor: new Date(Date.now() + 3600_000).toISOString() });
  assert.equal(scheduled.status, 200, scheduled.text);
  return { ...b, domain };
}

describe('PATCH /users/@me/projects/:id', () => {
  test('changes name, tracking, language and time zone; bad values are 422 and change nothing', async () => {
    const b = await bootstrap(env.server.api, 'Settings');
    const api = env.server.api.as({ cookie: b.cookie });
    const path = `/users/@me/projects/${b.project.id}`;
    const ok = await api.patch(path, { name: 'Renamed', tracking: 'MARKETING_ONLY', language: 'de-at', timezone: 'Europe/Berlin' });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.body.name, 'Renamed');
    assert.equal(ok.body.tracking, 'MARKETING_ONLY');
    assert.equal(ok.body.language, 'de-AT');
    assert.equal(ok.body.timezone, 'Europe/Berlin');

    for (const [body, field] of [
      [{ tracking: 'SOMETIMES' }, 'tracking'],
      [{ language: 'english' }, 'language'],
      [{ timezone: 'Mars/Olympus' }, 'timezone'],
      // Node's ICU knows it, PostgreSQL does not (analytics buckets are made in PostgreSQL).
      [{ timezone: 'US/Pacific-New' }, 'timezone'],
      [{ name: '' }, 'name'],
      [{ owner: 'me' }, ''],
    ] as const) {
      const res = await api.patch(path, body);
      assert.equal(res.status, 422, `${JSON.stringify(body)}: ${res.text}`);
      assert.equal(res.body.error.code, 'VALIDATION_ERROR');
      assert.equal(res.body.error.errors[0].field, field);
    }
    const [row] = await env.server.sql('SELECT name, tracking, language, timezone FROM projects WHERE id = $1', [b.project.id]);
    assert.deepEqual(row, { name: 'Renamed', tracking: 'MARKETING_ONLY', language: 'de-AT', timezone: 'Europe/Berlin' });
  });

  test('a name with control or bidi override characters, or nothing visible, is 422 on create and update', async () => {
    const b = await bootstrap(env.server.api, 'Plain');
    const api = env.server.api.as({ cookie: b.cookie });
    const projectsBefore = await env.server.sql('SELECT count(*)::int AS n FROM projects');
    for (const name of ['Acme\r\nBcc: x@evil.test', 'Acme\u0007', 'Invoice \u202Egnp.exe', 'a\u2066b\u2069', '\u200B\u200C\u200D', '\u3164', ' \u2060 ']) {
      for (const res of [await api.post('/users/@me/projects', { name }), await api.patch(`/users/@me/projects/${b.project.id}`, { name })]) {
        assert.equal(res.status, 422, `${JSON.stringify(name)}: ${res.text}`);
        assert.equal(res.body.error.code, 'VALIDATION_ERROR');
        assert.equal(res.body.error.errors[0].field, 'name');
      }
    }
    assert.deepEqual(await env.server.sql('SELECT count(*)::int AS n FROM projects'), projectsBefore);
    assert.deepEqual(await env.server.sql('SELECT name FROM projects WHERE id = $1', [b.project.id]), [{ name: 'Plain' }]);
    const renamed = await api.patch(`/users/@me/projects/${b.project.id}`, { name: 'Café 日本, Inc. 🚀' });
    assert.equal(renamed.status, 200, renamed.text);
    assert.equal(renamed.body.name, 'Café 日本, Inc. 🚀');
  });

  test('the language applies to the next email (the unsubscribe footer of marketing mail)', async () => {
    const b = await bootstrap(env.server.api, 'Lang');
    await verifyDomain(b.sk, env.dns, 'lang.example.test');
    await b.sk.post('/contacts', { email: 'reader@lang.test', subscribed: true });
    await env.server.api.patch(`/users/@me/projects/${b.project.id}`, { language: 'de' }, { cookie: b.cookie });
    const c = await b.sk.post('/campaigns', { name: 'N', subject: 'Neuigkeiten', body: '<p>Hallo</p>', from: 'news@lang.example.test' });
    assert.equal((await b.sk.post(`/campaigns/${c.body.data.id}/send`, {})).status, 200);
    const mail = await waitForMail(env.sink, 'reader@lang.test', 'Neuigkeiten');
    assert.match(String(mail.parsed.html), />Abmelden</);
  });
});

describe('reset and delete', () => {
  test('a MEMBER can neither reset nor delete (403, nothing changed)', async () => {
    const b = await bootstrap(env.server.api, 'Guarded');
    await b.sk.post('/contacts', { email: 'keep@g.test' });
    const m = await signupUser(env.server.api);
    await joinWithInvitation(env.server, await env.server.api.post(`/projects/${b.project.id}/members`, { email: m.email }, { cookie: b.cookie }), m.cookie);
    const member = env.server.api.as({ cookie: m.cookie });
    const reset = await member.post(`/users/@me/projects/${b.project.id}/reset`);
    assert.equal(reset.status, 403, reset.text);
    assert.equal(reset.body.error.code, 'FORBIDDEN');
    const del = await member.delete(`/users/@me/projects/${b.project.id}`);
    assert.equal(del.status, 403, del.text);
    const c = await counts(b.project.id);
    assert.equal(c.projects, 1);
    assert.equal(c.contacts, 1);
  });

  test('reset empties the project data, keeps domains, members, keys and settings; another project is untouched', async () => {
    const a = await populated('Reset Me');
    const other = await populated('Bystander');
    const otherBefore = await counts(other.project.id);
    const before = await counts(a.project.id);
    assert.ok(
      DATA_TABLES.every((t) => before[t] > 0),
      JSON.stringify(before),
    );

    const res = await env.server.api.post(`/users/@me/projects/${a.project.id}/reset`, undefined, { cookie: a.cookie });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.success, true);
    const afterReset = await counts(a.project.id);
    for (const t of DATA_TABLES) assert.equal(afterReset[t], 0, `${t} after reset`);
    assert.equal(afterReset.domains, 1);
    assert.equal(afterReset.memberships, 1);
    assert.equal(afterReset.projects, 1);
    assert.deepEqual(await counts(other.project.id), otherBefore);
    // Keys still work; the project is usable at once.
    const list = await a.sk.get('/contacts');
    assert.equal(list.status, 200);
    assert.equal(list.body.data.length, 0);
    const setup = await env.server.api.get(`/projects/${a.project.id}/setup-state`, { cookie: a.cookie });
    assert.deepEqual(setup.body, {
      hasVerifiedDomain: true,
      contactCount: 0,
      hasTemplate: false,
      lastCampaignSentAt: null,
      hasEnabledWorkflow: false,
      hasSentEmail: false,
      hasSubscription: false,
    });
  });

  test('delete removes every row of the project, stops its scheduled sends and refuses its keys at once', async () => {
    const a = await populated('Delete Me');
    const other = await populated('Neighbour');
    const otherBefore = await counts(other.project.id);
    const setup = await env.server.api.get(`/projects/${a.project.id}/setup-state`, { cookie: a.cookie });
    assert.equal(setup.status, 200, setup.text);
    assert.equal(setup.body.hasVerifiedDomain, true);
    assert.equal(setup.body.contactCount, 2);
    assert.equal(setup.body.hasTemplate, true);
    assert.equal(setup.body.hasSentEmail, true);
    assert.ok(Date.parse(setup.body.lastCampaignSentAt) > Date.now() - 120_000);

    assert.equal((await a.sk.get('/contacts')).status, 200, 'the key is cached');
    const del = await env.server.api.delete(`/users/@me/projects/${a.project.id}`, { cookie: a.cookie });
    assert.equal(del.status, 204, del.text);
    const refused = await a.sk.get('/contacts');
    assert.equal(refused.status, 401, refused.text);
    assert.equal(refused.body.error.code, 'INVALID_API_KEY');
    const gone = await counts(a.project.id);
    for (const [t, n] of Object.entries(gone)) assert.equal(n, 0, `${t} after delete`);
    assert.deepEqual(await counts(other.project.id), otherBefore);
    const again = await env.server.api.delete(`/users/@me/projects/${a.project.id}`, { cookie: a.cookie });
    assert.equal(again.status, 404);
  });

  test('setup-state takes the session cookie only; another project is 404; a MEMBER reads it', async () => {
    const a = await bootstrap(env.server.api, 'Mine');
    const b = await bootstrap(env.server.api, 'Theirs');
    for (const path of [`/projects/${a.project.id}/setup-state`, `/projects/${b.project.id}/setup-state`]) {
      const byKey = await a.sk.get(path);
      assert.equal(byKey.status, 401, byKey.text);
      assert.equal(byKey.body.error.code, 'UNAUTHORIZED');
    }
    const byCookie = await env.server.api.get(`/projects/${b.project.id}/setup-state`, { cookie: a.cookie });
    assert.equal(byCookie.status, 404);
    const m = await signupUser(env.server.api);
    await joinWithInvitation(env.server, await env.server.api.post(`/projects/${a.project.id}/members`, { email: m.email }, { cookie: a.cookie }), m.cookie);
    const member: Api = asMember(env.server.api, m.cookie, a.project.id);
    const res = await member.get(`/projects/${a.project.id}/setup-state`);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.contactCount, 0);
  });
});
