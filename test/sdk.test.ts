import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type Herald, HeraldError, createHerald } from '@herald/client';
import { type OpenApiDocument, generateOperations } from '../sdk/codegen.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { TestDns } from './helpers/dns-server.ts';
import { verifyDomain } from './helpers/domains.ts';
import { startMailEnv } from './helpers/mail.ts';
import type { SmtpSink } from './helpers/smtp-sink.ts';
import type { TestServer } from './helpers/server.ts';

let dns: TestDns;
let sink: SmtpSink;
let server: TestServer;
let b: Bootstrapped;
let herald: Herald;

const FROM = 'hello@sdk.example.test';

before(async () => {
  ({ dns, sink, server } = await startMailEnv());
  b = await bootstrap(server.api);
  await verifyDomain(b.sk, dns, 'sdk.example.test');
  herald = createHerald({ baseUrl: server.url, apiKey: b.project.secretKey });
});
after(async () => {
  await server?.stop();
  await sink?.stop();
  await dns?.stop();
});

describe('sdk/: the generated client', () => {
  test('sdk/src/operations.ts is what `npm run sdk:generate` makes from the current document', async () => {
    const doc = (await server.api.get<OpenApiDocument>('/openapi.json')).body;
    const committed = await readFile(path.join(import.meta.dirname, '..', 'sdk', 'src', 'operations.ts'), 'utf8');
    assert.ok(committed === generateOperations(doc), 'sdk/src/operations.ts is stale: run `npm run sdk:generate` and commit it');
  });

  test('emails.send with an Idempotency-Key: a retry is not performed and carries the first answer', async () => {
    const body = { to: 'ada@sdk-client.test', from: FROM, subject: 'Hi', body: '<p>Hello</p>' };
    const first = await herald.emails.send(body, { idempotencyKey: 'sdk-send-1' });
    assert.equal(first.success, true);
    assert.equal(first.data.emails.length, 1);
    assert.equal(first.data.emails[0].contact.email, 'ada@sdk-client.test');
    const retry = await herald.emails.send(body, { idempotencyKey: 'sdk-send-1' }).catch((e: unknown) => e);
    assert.ok(retry instanceof HeraldError);
    assert.equal(retry.statusCode, 409);
    assert.equal(retry.code, 'IDEMPOTENCY_KEY_REUSED');
    assert.deepEqual(retry.details?.originalResponse, first);
    const email = await herald.emails.get(first.data.emails[0].email);
    assert.equal(email.to, 'ada@sdk-client.test');
    assert.equal(email.subject, 'Hi');
  });

  test('contacts: upsert, get, update, list, iterate every page, delete', async () => {
    const created = await herald.contacts.upsert({ email: 'grace@sdk-client.test', data: { plan: 'pro' } });
    assert.deepEqual(created._meta, { isNew: true, isUpdate: false });
    const got = await herald.contacts.get(created.id);
    assert.equal(got.data.plan, 'pro');
    const updated = await herald.contacts.update(created.id, { subscribed: false, data: { plan: 'team' } });
    assert.equal(updated.subscribed, false);
    assert.equal(updated.data.plan, 'team');
    for (let i = 0; i < 5; i++) await herald.contacts.upsert({ email: `page-${i}@sdk-client.test` });
    const page = await herald.contacts.list({ limit: 2, search: 'page-' });
    assert.equal(page.data.length, 2);
    assert.equal(page.hasMore, true);
    assert.equal(page.total, 5);
    const all: string[] = [];
    for await (const c of herald.contacts.list.all({ limit: 2, search: 'page-', sort: 'email', dir: 'asc' })) all.push(c.email);
    assert.deepEqual(
      all,
      [0, 1, 2, 3, 4].map((i) => `page-${i}@sdk-client.test`),
    );
    assert.equal(await herald.contacts.delete(created.id), undefined);
  });

  test('errors are HeraldError with code, statusCode and requestId', async () => {
    const missing = await herald.contacts.get('cnt_nope').catch((e: unknown) => e);
    assert.ok(missing instanceof HeraldError);
    assert.equal(missing.statusCode, 404);
    assert.equal(missing.code, 'CONTACT_NOT_FOUND');
    assert.match(missing.requestId ?? '', /.+/);
    const invalid = await herald.contacts.update('cnt_x', { email: 'not an email' }).catch((e: unknown) => e);
    assert.ok(invalid instanceof HeraldError);
    assert.equal(invalid.statusCode, 422);
    assert.equal(invalid.code, 'VALIDATION_ERROR');
    assert.equal(invalid.errors?.[0]?.field, 'email');
    const simple = await herald.contacts.upsert({} as never).catch((e: unknown) => e);
    assert.ok(simple instanceof HeraldError);
    assert.equal(simple.statusCode, 400);
    assert.equal(simple.message, 'email is required');
  });

  test('events.track with the public key', async () => {
    const browser = createHerald({ baseUrl: server.url, apiKey: b.project.publicKey });
    const res = await browser.events.track({ email: 'lin@sdk-client.test', event: 'signed-up', data: { plan: 'pro' } }, { idempotencyKey: 't-1' });
    assert.equal(res.success, true);
    assert.match(res.data.contact, /^cnt_/);
    const names = await herald.events.names();
    // The tracked names: the email.* events of this file's earlier sends are recorded as their delivery goes, at times of their own.
    assert.deepEqual(
      names.names.map((n) => n.name).filter((n) => !n.startsWith('email.')),
      ['signed-up'],
    );
  });

  test('templates, segments, campaigns and workflows through the client', async () => {
    const template = await herald.templates.create({ name: 'Welcome', subject: 'Hi {{name}}', body: '<p>Hi</p>', from: FROM });
    assert.equal((await herald.templates.get(template.id)).name, 'Welcome');
    assert.equal((await herald.templates.list({ pageSize: 10 })).total, 1);

    const segment = await herald.segments.create({
      name: 'Pro',
      condition: { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }] },
    });
    assert.equal(segment.type, 'DYNAMIC');
    assert.deepEqual(
      (await herald.segments.list()).map((s) => s.name),
      ['Pro'],
    );

    const campaign = await herald.campaigns.create({ name: 'May', subject: 'News', body: '<p>News</p>', from: FROM });
    assert.equal(campaign.data.status, 'DRAFT');
    assert.equal((await herald.campaigns.get(campaign.data.id)).name, 'May');

    const workflow = await herald.workflows.create({ name: 'Onboarding', eventName: 'signed-up' });
    assert.equal(workflow.enabled, false);
    assert.equal((await herald.workflows.list()).total, 1);

    const domains = await herald.domains.list(b.project.id);
    assert.deepEqual(
      domains.map((d) => [d.domain, d.status]),
      [['sdk.example.test', 'verified']],
    );
    assert.deepEqual((await herald.suppressions.list()).data, []);
  });

  test('activity, analytics, projects and members through the client', async () => {
    const activity = await herald.activity.list({ limit: 5 });
    assert.ok(activity.data.some((a) => a.type === 'email.sent' || a.type === 'event' || a.contact?.email === 'ada@sdk-client.test'));
    const series = await herald.analytics.timeseries({ interval: 'day', metric: 'sent' });
    assert.equal(series.interval, 'day');
    assert.ok(series.points.length >= 30);
    // Dashboard operations take the session cookie; the secret key is refused there.
    const refused = await herald.members.list(b.project.id).catch((err: unknown) => err);
    assert.ok(refused instanceof HeraldError, String(refused));
    assert.deepEqual([refused.statusCode, refused.code], [401, 'UNAUTHORIZED']);
    const dashboard = createHerald({ baseUrl: server.url, headers: { cookie: b.cookie } });
    const setup = await dashboard.projects.setupState(b.project.id);
    assert.equal(setup.hasVerifiedDomain, true);
    const members = await dashboard.members.list(b.project.id);
    assert.deepEqual(
      members.members.map((m) => m.role),
      ['OWNER'],
    );
  });
});
