import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestDns, startTestDns } from './helpers/dns-server.ts';
import { verifyDomain } from './helpers/domains.ts';
import type { Api, Res } from './helpers/http.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { type SmtpSink, startSmtpSink } from './helpers/smtp-sink.ts';

let dns: TestDns;
let sink: SmtpSink;
let server: TestServer;
let p: Bootstrapped;
let other: Bootstrapped;
const DOMAIN = 'err.example.test';
const FROM = `news@${DOMAIN}`;

before(async () => {
  dns = await startTestDns();
  sink = await startSmtpSink();
  // A slow send rate keeps a campaign SENDING long enough to try what SENDING forbids.
  server = await startTestServer({ DNS_SERVERS: dns.address, SMTP_URL: sink.url, SEND_RATE_PER_SECOND: '2' });
  p = await bootstrap(server.api, 'errors');
  other = await bootstrap(server.api, 'other');
  await verifyDomain(p.sk, dns, DOMAIN);
  for (const email of ['e1@err.test', 'e2@err.test', 'e3@err.test', 'e4@err.test']) {
    assert.equal((await p.sk.post('/contacts', { email })).status, 201);
  }
});
after(async () => {
  await server?.stop();
  await sink?.stop();
  await dns?.stop();
});

const valid = (over: Record<string, unknown> = {}) => ({ name: 'Err', subject: 'Hi', body: '<p>Hi</p>', from: FROM, ...over });

async function draft(api: Api = p.sk, over: Record<string, unknown> = {}) {
  const res = await api.post('/campaigns', valid(over));
  assert.equal(res.status, 201, res.text);
  return res.body.data;
}

function assertError(res: Res, status: number, code: string, field?: string) {
  assert.equal(res.status, status, res.text);
  assert.equal(res.body.success, false);
  assert.equal(res.body.error.code, code);
  assert.equal(res.body.error.statusCode, status);
  if (field)
    assert.ok(
      res.body.error.errors.some((e: { field: string }) => e.field === field),
      res.text,
    );
}

describe('audience rules on create and PUT', () => {
  test('SEGMENT without segmentId is a 422 naming segmentId', async () => {
    assertError(await p.sk.post('/campaigns', valid({ audienceType: 'SEGMENT' })), 422, 'VALIDATION_ERROR', 'segmentId');
    const c = await draft();
    assertError(await p.sk.put(`/campaigns/${c.id}`, { audienceType: 'SEGMENT' }), 422, 'VALIDATION_ERROR', 'segmentId');
  });

  test('FILTERED without a condition is a 422 naming audienceCondition', async () => {
    assertError(await p.sk.post('/campaigns', valid({ audienceType: 'FILTERED' })), 422, 'VALIDATION_ERROR', 'audienceCondition');
    assertError(await p.sk.post('/campaigns', valid({ audienceType: 'FILTERED', audienceCondition: null })), 422, 'VALIDATION_ERROR', 'audienceCondition');
  });

  test('a malformed condition is a 400 naming the filter', async () => {
    const res = await p.sk.post(
      '/campaigns',
      valid({ audienceType: 'FILTERED', audienceCondition: { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'sortOf', value: 1 }] }] } }),
    );
    assertError(res, 400, 'BAD_REQUEST');
    assert.match(res.body.error.message, /sortOf/);
  });

  test('a segment of another project is 404 SEGMENT_NOT_FOUND, as is an unknown one', async () => {
    const theirs = await other.sk.post('/segments', {
      name: 'Theirs',
      condition: { logic: 'AND', groups: [{ filters: [{ field: 'email', operator: 'contains', value: '@' }] }] },
    });
    assert.equal(theirs.status, 201, theirs.text);
    const res = await p.sk.post('/campaigns', valid({ audienceType: 'SEGMENT', segmentId: theirs.body.id }));
    assertError(res, 404, 'SEGMENT_NOT_FOUND');
    assertError(await p.sk.post('/campaigns', valid({ audienceType: 'SEGMENT', segmentId: '0190f0a0-0000-7000-8000-000000000000' })), 404, 'SEGMENT_NOT_FOUND');
    assertError(await p.sk.post('/campaigns', valid({ audienceType: 'SEGMENT', segmentId: 'seg-1' })), 422, 'VALIDATION_ERROR', 'segmentId');
  });
});

describe('content and sender on create', () => {
  test('missing required fields are a 422 naming each', async () => {
    const res = await p.sk.post('/campaigns', { name: 'No content' });
    assertError(res, 422, 'VALIDATION_ERROR');
    const fields = res.body.error.errors.map((e: { field: string }) => e.field).sort();
    assert.deepEqual(fields, ['body', 'from', 'subject']);
  });

  test('an unverified sender domain is a 403 naming the domain', async () => {
    const res = await p.sk.post('/campaigns', valid({ from: 'news@unverified.example' }));
    assertError(res, 403, 'INTERNAL_SERVER_ERROR');
    assert.match(res.body.error.message, /unverified\.example/);
    const c = await draft();
    assertError(await p.sk.put(`/campaigns/${c.id}`, { from: 'x@unverified.example' }), 403, 'INTERNAL_SERVER_ERROR');
  });

  test('Liquid that does not parse is a 422 invalid_template', async () => {
    const res = await p.sk.post('/campaigns', valid({ body: '<p>{% if plan %}unclosed</p>' }));
    assertError(res, 422, 'VALIDATION_ERROR', 'body');
    assert.equal(res.body.error.errors[0].code, 'invalid_template');
    assertError(await p.sk.post('/campaigns', valid({ subject: 'Hi {{ name | nosuchfilter }}' })), 422, 'VALIDATION_ERROR', 'subject');
  });

  test('bad enum values are 422', async () => {
    assertError(await p.sk.post('/campaigns', valid({ type: 'NEWSLETTER' })), 422, 'VALIDATION_ERROR', 'type');
    assertError(await p.sk.post('/campaigns', valid({ audienceType: 'SOME' })), 422, 'VALIDATION_ERROR', 'audienceType');
  });

  test('a segment or a condition for another audience type is a 422 on it, not dropped; null is fine', async () => {
    const condition = { logic: 'AND', groups: [{ filters: [{ field: 'email', operator: 'contains', value: 'e1' }] }] };
    const created = await p.sk.post('/campaigns', valid({ audienceCondition: condition }));
    assertError(created, 422, 'VALIDATION_ERROR', 'audienceCondition');
    assert.equal(created.body.error.errors[0].message, "audienceCondition applies when audienceType is FILTERED; this campaign's is ALL");
    const { id } = await draft(p.sk, { segmentId: null, audienceCondition: null });
    assertError(await p.sk.put(`/campaigns/${id}`, { audienceCondition: condition }), 422, 'VALIDATION_ERROR', 'audienceCondition');
    assertError(
      await p.sk.put(`/campaigns/${id}`, { audienceType: 'FILTERED', segmentId: '01900000-0000-7000-8000-000000000001', audienceCondition: condition }),
      422,
      'VALIDATION_ERROR',
      'segmentId',
    );
    const filtered = await p.sk.put(`/campaigns/${id}`, { audienceType: 'FILTERED', audienceCondition: condition });
    assert.equal(filtered.status, 200, filtered.text);
    assert.deepEqual([filtered.body.audienceType, filtered.body.totalRecipients], ['FILTERED', 1]);
  });

  test('unknown keys are 422 unrecognized_keys on create and on PUT, not accepted and ignored', async () => {
    const created = await p.sk.post('/campaigns', valid({ status: 'SENT', sentCount: 5 }));
    assert.equal(created.status, 422, created.text);
    assert.equal(created.body.error.errors[0].code, 'unrecognized_keys');
    const { id } = await draft();
    for (const body of [{ status: 'SENT' }, { scheduledFor: new Date(Date.now() + 3600_000).toISOString() }]) {
      const put = await p.sk.put(`/campaigns/${id}`, body);
      assert.equal(put.status, 422, put.text);
      assert.equal(put.body.error.errors[0].code, 'unrecognized_keys');
    }
    assert.equal((await p.sk.get(`/campaigns/${id}`)).body.status, 'DRAFT');
  });
});

describe('send and schedule', () => {
  test('an unparseable scheduledFor is a 400', async () => {
    const c = await draft();
    for (const scheduledFor of ['next tuesday', '2025-13-45T99:00:00Z', '']) {
      const res = await p.sk.post(`/campaigns/${c.id}/send`, { scheduledFor });
      assertError(res, 400, 'BAD_REQUEST');
    }
    assertError(await p.sk.post(`/campaigns/${c.id}/send`, { scheduledFor: { at: 'tomorrow' } }), 422, 'VALIDATION_ERROR', 'scheduledFor');
    assert.equal((await p.sk.get(`/campaigns/${c.id}`)).body.status, 'DRAFT');
  });

  test('a scheduledFor in the past is a 400', async () => {
    const c = await draft();
    const res = await p.sk.post(`/campaigns/${c.id}/send`, { scheduledFor: new Date(Date.now() - 60_000).toISOString() });
    assertError(res, 400, 'BAD_REQUEST');
    assert.match(res.body.error.message, /past/);
    assert.equal((await p.sk.get(`/campaigns/${c.id}`)).body.status, 'DRAFT');
  });

  test('sending with no recipients is a 400', async () => {
    const empty = await bootstrap(server.api, 'empty');
    await verifyDomain(empty.sk, dns, DOMAIN);
    const c = await draft(empty.sk);
    assert.equal(c.totalRecipients, 0);
    const res = await empty.sk.post(`/campaigns/${c.id}/send`, {});
    assertError(res, 400, 'BAD_REQUEST');
    assert.match(res.body.error.message, /no recipients/);
  });

  test('cancel of a DRAFT is a 409', async () => {
    const c = await draft();
    const res = await p.sk.post(`/campaigns/${c.id}/cancel`);
    assertError(res, 409, 'CONFLICT');
    assert.deepEqual(res.body.error.details, { status: 'DRAFT' });
  });

  test('a SCHEDULED campaign cannot be deleted (409) but can be edited; cancelled, it can be deleted', async () => {
    const c = await draft();
    const at = new Date(Date.now() + 3_600_000).toISOString();
    assert.equal((await p.sk.post(`/campaigns/${c.id}/send`, { scheduledFor: at })).status, 200);
    assertError(await p.sk.delete(`/campaigns/${c.id}`), 409, 'CONFLICT');
    const edited = await p.sk.put(`/campaigns/${c.id}`, { subject: 'Edited while scheduled' });
    assert.equal(edited.status, 200, edited.text);
    assert.equal(edited.body.status, 'SCHEDULED');
    assert.equal(edited.body.scheduledFor, at);
    assert.equal((await p.sk.post(`/campaigns/${c.id}/cancel`)).body.status, 'DRAFT');
    assert.equal((await p.sk.delete(`/campaigns/${c.id}`)).status, 204);
  });

  test('while SENDING: PUT, delete and send are 409; once SENT: send and cancel are 409', async () => {
    const c = await draft();
    const sent = await p.sk.post(`/campaigns/${c.id}/send`, {});
    assert.equal(sent.status, 200, sent.text);
    assert.equal(sent.body.data.status, 'SENDING');
    const put = await p.sk.put(`/campaigns/${c.id}`, { name: 'Too late' });
    assertError(put, 409, 'CONFLICT');
    assert.deepEqual(put.body.error.details, { status: 'SENDING' });
    assertError(await p.sk.delete(`/campaigns/${c.id}`), 409, 'CONFLICT');
    assertError(await p.sk.post(`/campaigns/${c.id}/send`, {}), 409, 'CONFLICT');

    const deadline = Date.now() + 30_000;
    let status = 'SENDING';
    while (status !== 'SENT' && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      status = (await p.sk.get(`/campaigns/${c.id}`)).body.status;
    }
    assert.equal(status, 'SENT');
    const again = await p.sk.post(`/campaigns/${c.id}/send`, {});
    assertError(again, 409, 'CONFLICT');
    assert.deepEqual(again.body.error.details, { status: 'SENT' });
    assertError(await p.sk.post(`/campaigns/${c.id}/cancel`), 409, 'CONFLICT');
    assertError(await p.sk.put(`/campaigns/${c.id}`, { name: 'After' }), 409, 'CONFLICT');
    assert.equal((await p.sk.delete(`/campaigns/${c.id}`)).status, 204, 'a SENT campaign can be deleted');
  });

  test('a test send to an invalid address is a 422', async () => {
    const c = await draft();
    assertError(await p.sk.post(`/campaigns/${c.id}/test`, { email: 'not-an-email' }), 422, 'VALIDATION_ERROR', 'email');
    assertError(await p.sk.post(`/campaigns/${c.id}/test`, {}), 422, 'VALIDATION_ERROR', 'email');
  });
});

describe('list query', () => {
  test('status filter bogus is a 400', async () => {
    const res = await p.sk.get('/campaigns?status=bogus');
    assertError(res, 400, 'BAD_REQUEST');
    assert.match(res.body.error.message, /bogus/);
  });

  test('page and pageSize below 1 are 422; a huge pageSize is clamped', async () => {
    assertError(await p.sk.get('/campaigns?page=0'), 422, 'VALIDATION_ERROR', 'page');
    assertError(await p.sk.get('/campaigns?pageSize=0'), 422, 'VALIDATION_ERROR', 'pageSize');
    assert.equal((await p.sk.get('/campaigns?pageSize=5000')).body.pageSize, 100);
  });

  test('without a key: 401; with the public key: 401', async () => {
    assertError(await server.api.get('/campaigns'), 401, 'INVALID_API_KEY');
    assertError(await p.pk.get('/campaigns'), 401, 'INVALID_API_KEY');
  });
});

describe('an audience PostgreSQL would take long over', () => {
  test('is cancelled after 10 s: 400 on the audience, nothing created', async () => {
    const slow = await bootstrap(server.api, 'slow audience');
    await verifyDomain(slow.sk, dns, 'slow.example.test');
    // 480 date filters on 20,000 contacts: about 10 µs each per contact, some 90 s of PostgreSQL.
    await server.sql(
      `INSERT INTO contacts (id, project_id, email, subscribed, data, created_at, updated_at)
       SELECT 'cnt_' || md5('slow' || g), $1, 'slow' || g || '@example.com', true, '{"d": "2024-05-01T10:00:00Z"}', now(), now()
         FROM generate_series(1, 20000) AS g`,
      [slow.project.id],
    );
    const audienceCondition = {
      logic: 'AND',
      groups: [{ filters: Array.from({ length: 480 }, (_, i) => ({ field: 'data.d', operator: 'olderThan', value: i + 1, unit: 'minutes' })) }],
    };
    const res = await slow.sk.post('/campaigns', valid({ from: 'news@slow.example.test', audienceType: 'FILTERED', audienceCondition }));
    assert.equal(res.status, 400, res.text);
    assert.equal(res.body.error.message, "Evaluating the condition over this project's contacts took longer than 10 s: use fewer or simpler filters");
    assert.deepEqual(res.body.error.details, { path: 'audience' });
    assert.equal((await slow.sk.get('/campaigns')).body.total, 0);
  });
});
