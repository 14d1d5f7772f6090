import assert from 'node:assert/strict';
import { after, before, describe, mock, test } from 'node:test';
import { usage as usageOf } from '../src/modules/usage/service.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestDns, startTestDns } from './helpers/dns-server.ts';
import { verifyDomain } from './helpers/domains.ts';
import type { Api } from './helpers/http.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

let dns: TestDns;
let server: TestServer;
let a: Bootstrapped;
let b: Bootstrapped;

// Strictly increasing time, so creation order is the createdAt order even within one millisecond.
let last = 0;
const clock = { now: () => new Date((last = Math.max(Date.now(), last + 1))) };

before(async () => {
  dns = await startTestDns();
  server = await startTestServer({ DNS_SERVERS: dns.address }, { clock });
  a = await bootstrap(server.api, 'Project A');
  b = await bootstrap(server.api, 'Project B');
  await verifyDomain(a.sk, dns, 'acme.test');
  await verifyDomain(b.sk, dns, 'beta.test');
});
after(async () => {
  await server?.stop();
  await dns?.stop();
});

const valid = (over: Record<string, unknown> = {}) => ({
  name: 'Welcome',
  subject: 'Hi {{ first name ?? "there" }}',
  body: '<p>Hello {{ name ?? "friend" }}</p><a href="{{ unsubscribeUrl }}">Unsubscribe</a>',
  from: 'hello@acme.test',
  ...over,
});

async function create(api: Api, over: Record<string, unknown> = {}) {
  const res = await api.post('/templates', valid(over));
  assert.equal(res.status, 201, res.text);
  return res.body;
}

const MISSING_UUID = '01900000-0000-7000-8000-000000000000';

describe('create and read', () => {
  test('POST /templates → 201 with the full record and defaults; GET returns it', async () => {
    const res = await a.sk.post('/templates', valid({ from: ' Hello@ACME.test ' }));
    assert.equal(res.status, 201, res.text);
    const t = res.body;
    assert.match(t.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.deepEqual(
      { ...t, id: undefined, createdAt: undefined, updatedAt: undefined },
      {
        id: undefined,
        projectId: a.project.id,
        name: 'Welcome',
        description: null,
        subject: 'Hi {{ first name ?? "there" }}',
        body: '<p>Hello {{ name ?? "friend" }}</p><a href="{{ unsubscribeUrl }}">Unsubscribe</a>',
        from: 'hello@acme.test',
        fromName: null,
        replyTo: null,
        type: 'MARKETING',
        createdAt: undefined,
        updatedAt: undefined,
      },
    );
    assert.equal(t.createdAt, t.updatedAt);
    const got = await a.sk.get(`/templates/${t.id}`);
    assert.equal(got.status, 200);
    assert.deepEqual(got.body, t);
  });

  test('optional fields are stored; blank optional fields are null', async () => {
    const t = await create(a.sk, {
      description: 'Sent after signup',
      fromName: 'Acme Team',
      replyTo: 'Support@Acme.test',
      type: 'TRANSACTIONAL',
    });
    assert.equal(t.description, 'Sent after signup');
    assert.equal(t.fromName, 'Acme Team');
    assert.equal(t.replyTo, 'support@acme.test');
    assert.equal(t.type, 'TRANSACTIONAL');
    const blank = await create(a.sk, { description: '', fromName: '  ', replyTo: '' });
    assert.equal(blank.description, null);
    assert.equal(blank.fromName, null);
    assert.equal(blank.replyTo, null);
  });

  test('a subdomain of a verified domain may send', async () => {
    const t = await create(a.sk, { from: 'news@mail.acme.test' });
    assert.equal(t.from, 'news@mail.acme.test');
  });

  test('the session cookie with X-Project-Id works like the secret key', async () => {
    const t = await create(a.sk);
    const res = await server.api.get(`/templates/${t.id}`, { cookie: a.cookie, headers: { 'x-project-id': a.project.id } });
    assert.equal(res.status, 200);
    assert.equal(res.body.id, t.id);
  });
});

describe('create: bad input', () => {
  for (const field of ['name', 'subject', 'body', 'from'] as const) {
    test(`missing ${field} → 400 { error } simple body (absent, null or blank)`, async () => {
      for (const value of [undefined, null, '  ']) {
        const payload: Record<string, unknown> = valid();
        if (value === undefined) delete payload[field];
        else payload[field] = value;
        const res = await a.sk.post('/templates', payload);
        assert.equal(res.status, 400, `${field}=${String(value)}: ${res.text}`);
        assert.deepEqual(res.body, { error: `${field} is required` });
      }
    });
  }

  test('several missing fields are named together; an empty body is 400 too', async () => {
    const res = await a.sk.post('/templates', { name: 'x', body: 'y' });
    assert.equal(res.status, 400);
    assert.deepEqual(res.body, { error: 'subject and from are required' });
    const empty = await a.sk.post('/templates', {});
    assert.deepEqual(empty.body, { error: 'name, subject, body and from are required' });
  });

  test('invalid values → 422 VALIDATION_ERROR with field errors', async () => {
    const cases: [Record<string, unknown>, string, string][] = [
      [{ from: 'not-an-email' }, 'from', 'invalid_string'],
      [{ replyTo: 'nope' }, 'replyTo', 'invalid_string'],
      [{ type: 'NEWSLETTER' }, 'type', 'invalid_enum_value'],
      [{ name: 42 }, 'name', 'invalid_type'],
      [{ subject: 'two\nlines' }, 'subject', 'custom'],
      [{ subject: 'x'.repeat(999) }, 'subject', 'too_big'],
    ];
    for (const [over, field, code] of cases) {
      const res = await a.sk.post('/templates', valid(over));
      assert.equal(res.status, 422, `${JSON.stringify(over)}: ${res.text}`);
      assert.equal(res.body.error.code, 'VALIDATION_ERROR');
      assert.equal(res.body.error.message, 'Request validation failed');
      assert.deepEqual(
        res.body.error.errors.map((e: { field: string; code: string }) => [e.field, e.code]),
        [[field, code]],
      );
    }
  });

  test('a from on an unverified domain → 403 naming the domain', async () => {
    for (const from of ['hello@unknown.test', 'hello@beta.test']) {
      const res = await a.sk.post('/templates', valid({ from }));
      assert.equal(res.status, 403, res.text);
      assert.equal(res.body.error.code, 'INTERNAL_SERVER_ERROR');
      assert.match(res.body.error.message, new RegExp(from.split('@')[1].replace('.', '\\.')));
    }
  });

  test('Liquid that does not parse → 422 invalid_template, nothing stored', async () => {
    const before = await a.sk.get('/templates?pageSize=100');
    const bad = await a.sk.post('/templates', valid({ body: '<p>{% if plan %}pro</p>', subject: 'Hi {{ name' }));
    assert.equal(bad.status, 422, bad.text);
    assert.equal(bad.body.error.code, 'VALIDATION_ERROR');
    const errors = bad.body.error.errors as { field: string; code: string; message: string }[];
    assert.deepEqual(
      errors.map((e) => [e.field, e.code]),
      [
        ['subject', 'invalid_template'],
        ['body', 'invalid_template'],
      ],
    );
    assert.match(errors[1].message, /not closed/);
    const filter = await a.sk.post('/templates', valid({ body: '{{ name | nosuchfilter }}' }));
    assert.equal(filter.status, 422);
    assert.match(filter.body.error.errors[0].message, /nosuchfilter/);
    const include = await a.sk.post('/templates', valid({ body: '{% include "/etc/passwd" %}' }));
    assert.equal(include.status, 422);
    const after = await a.sk.get('/templates?pageSize=100');
    assert.equal(after.body.total, before.body.total);
  });
});

describe('large templates', () => {
  test('are checked on a compose thread, with the same errors in field order', async () => {
    // 10,000 outputs over 1.9 MB took about 55 ms to parse on the event loop; sources that would
    // take more than a few ms are checked on a compose thread. Nothing else in this file composes a message.
    assert.equal(server.ctx.threads.compose.threadCount(), 0);
    const large = (tail: string) => `${'<p>{{n}} says hello to everyone on the list, now and then.</p>\n'.repeat(9_000)}${tail}`;
    const bad = await a.sk.post('/templates', valid({ subject: 'Hi {{ name', body: large('{% if plan %}<p>pro</p>') }));
    assert.equal(bad.status, 422, bad.text.slice(0, 300));
    const errors = bad.body.error.errors as { field: string; code: string; message: string }[];
    assert.deepEqual(
      errors.map((e) => [e.field, e.code]),
      [
        ['subject', 'invalid_template'],
        ['body', 'invalid_template'],
      ],
    );
    assert.equal(errors[1].message, 'Invalid template: tag {% if plan %} not closed, line:9001, col:1');
    assert.equal(server.ctx.threads.compose.threadCount(), 1, 'the body was checked on a compose thread');
    const good = await a.sk.post('/templates', valid({ body: large('{% if plan %}<p>pro</p>{% endif %}') }));
    assert.equal(good.status, 201, good.text.slice(0, 300));
    assert.equal(good.body.body.length, 9_000 * 63 + 34);
  });
});

describe('update', () => {
  test('PATCH changes the fields sent, keeps the others, and moves updatedAt', async () => {
    const t = await create(a.sk, { description: 'old', fromName: 'Acme' });
    const res = await a.sk.patch(`/templates/${t.id}`, { name: 'Renamed', subject: 'New {{ x }}', description: null, type: 'HEADLESS' });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.name, 'Renamed');
    assert.equal(res.body.subject, 'New {{ x }}');
    assert.equal(res.body.description, null);
    assert.equal(res.body.type, 'HEADLESS');
    assert.equal(res.body.fromName, 'Acme');
    assert.equal(res.body.body, t.body);
    assert.equal(res.body.createdAt, t.createdAt);
    assert.ok(res.body.updatedAt > t.updatedAt);
    const got = await a.sk.get(`/templates/${t.id}`);
    assert.deepEqual(got.body, res.body);
  });

  test('PATCH ignores read-only fields sent back with the record', async () => {
    const t = await create(a.sk);
    const res = await a.sk.patch(`/templates/${t.id}`, { ...t, id: 'other', projectId: b.project.id, name: 'Kept id' });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.id, t.id);
    assert.equal(res.body.projectId, a.project.id);
    assert.equal(res.body.name, 'Kept id');
  });

  test('PATCH with bad Liquid → 422 invalid_template, unchanged', async () => {
    const t = await create(a.sk);
    const res = await a.sk.patch(`/templates/${t.id}`, { body: '{% for x in items %}' });
    assert.equal(res.status, 422, res.text);
    assert.deepEqual(
      res.body.error.errors.map((e: { field: string; code: string }) => [e.field, e.code]),
      [['body', 'invalid_template']],
    );
    assert.equal((await a.sk.get(`/templates/${t.id}`)).body.body, t.body);
  });

  test('PATCH from to an unverified domain → 403; to a verified one → 200', async () => {
    const t = await create(a.sk);
    const bad = await a.sk.patch(`/templates/${t.id}`, { from: 'x@elsewhere.test' });
    assert.equal(bad.status, 403);
    assert.match(bad.body.error.message, /elsewhere\.test/);
    const ok = await a.sk.patch(`/templates/${t.id}`, { from: 'Team@ACME.test' });
    assert.equal(ok.status, 200);
    assert.equal(ok.body.from, 'team@acme.test');
  });

  test('PATCH required fields cannot be emptied (422)', async () => {
    const t = await create(a.sk);
    const res = await a.sk.patch(`/templates/${t.id}`, { name: '', subject: null });
    assert.equal(res.status, 422);
    assert.deepEqual(res.body.error.errors.map((e: { field: string; code: string }) => [e.field, e.code]).sort(), [
      ['name', 'too_small'],
      ['subject', 'invalid_type'],
    ]);
  });
});

describe('list', () => {
  let c: Bootstrapped;
  const ids: Record<string, string> = {};

  before(async () => {
    c = await bootstrap(server.api, 'Project C');
    await verifyDomain(c.sk, dns, 'list.test');
    const specs = [
      { name: 'Alpha receipt', type: 'TRANSACTIONAL', subject: 'Your receipt' },
      { name: 'beta news', type: 'MARKETING', subject: 'Weekly NEWS', description: 'The newsletter' },
      { name: 'Gamma reset', type: 'TRANSACTIONAL', subject: 'Reset your password' },
      { name: 'Delta promo', type: 'MARKETING', subject: 'Sale', description: 'Black Friday 100%_off' },
      { name: 'Epsilon ping', type: 'HEADLESS', subject: 'Ping' },
    ];
    for (const s of specs) ids[s.name] = (await create(c.sk, { ...s, from: 'a@list.test' })).id;
    // Touch the oldest so updatedAt order differs from createdAt order.
    const touched = await c.sk.patch(`/templates/${ids['Alpha receipt']}`, { fromName: 'Touched' });
    assert.equal(touched.status, 200);
  });

  const names = (res: { body: { data: { name: string }[] } }) => res.body.data.map((t) => t.name);

  test('defaults: newest first, page 1 of 20, with totals', async () => {
    const res = await c.sk.get('/templates');
    assert.equal(res.status, 200);
    assert.equal(res.body.total, 5);
    assert.equal(res.body.page, 1);
    assert.equal(res.body.pageSize, 20);
    assert.equal(res.body.totalPages, 1);
    assert.deepEqual(names(res), ['Epsilon ping', 'Delta promo', 'Gamma reset', 'beta news', 'Alpha receipt']);
    assert.equal(res.body.data[0].projectId, c.project.id);
  });

  test('page and pageSize', async () => {
    const p2 = await c.sk.get('/templates?page=2&pageSize=2');
    assert.deepEqual(names(p2), ['Gamma reset', 'beta news']);
    assert.equal(p2.body.totalPages, 3);
    assert.equal(p2.body.total, 5);
    const p4 = await c.sk.get('/templates?page=4&pageSize=2');
    assert.deepEqual(p4.body.data, []);
    assert.equal(p4.body.total, 5);
    const clamped = await c.sk.get('/templates?pageSize=5000');
    assert.equal(clamped.body.pageSize, 100);
    for (const q of ['page=0', 'pageSize=0', 'page=abc']) {
      const bad = await c.sk.get(`/templates?${q}`);
      assert.equal(bad.status, 422, q);
      assert.equal(bad.body.error.code, 'VALIDATION_ERROR');
    }
  });

  test('type filter (case-insensitive value); an unknown type is 422', async () => {
    assert.deepEqual(names(await c.sk.get('/templates?type=TRANSACTIONAL')), ['Gamma reset', 'Alpha receipt']);
    assert.deepEqual(names(await c.sk.get('/templates?type=headless')), ['Epsilon ping']);
    const bad = await c.sk.get('/templates?type=NEWSLETTER');
    assert.equal(bad.status, 422);
    assert.equal(bad.body.error.errors[0].field, 'type');
  });

  test('search matches name, description or subject, case-insensitively, literally', async () => {
    assert.deepEqual(names(await c.sk.get('/templates?search=RECEIPT')), ['Alpha receipt']);
    assert.deepEqual(names(await c.sk.get('/templates?search=newsletter')), ['beta news']);
    assert.deepEqual(names(await c.sk.get('/templates?search=password')), ['Gamma reset']);
    assert.deepEqual(names(await c.sk.get('/templates?search=news')), ['beta news']);
    assert.deepEqual(names(await c.sk.get(`/templates?search=${encodeURIComponent('100%_')}`)), ['Delta promo']);
    assert.deepEqual(names(await c.sk.get(`/templates?search=${encodeURIComponent('%')}`)), ['Delta promo']);
    assert.deepEqual(names(await c.sk.get('/templates?search=nothing-like-this')), []);
    const combined = await c.sk.get('/templates?search=e&type=MARKETING&sort=name&dir=asc');
    assert.deepEqual(names(combined), ['beta news', 'Delta promo']);
  });

  test('sort by name, createdAt or updatedAt; dir; an unknown sort falls back to createdAt', async () => {
    const byName = names(await c.sk.get('/templates?sort=name&dir=asc'));
    assert.deepEqual(
      byName.map((n) => n.toLowerCase()),
      ['alpha receipt', 'beta news', 'delta promo', 'epsilon ping', 'gamma reset'],
    );
    assert.deepEqual(names(await c.sk.get('/templates?sort=createdAt&dir=asc')), ['Alpha receipt', 'beta news', 'Gamma reset', 'Delta promo', 'Epsilon ping']);
    assert.deepEqual(names(await c.sk.get('/templates?sort=updatedAt'))[0], 'Alpha receipt');
    assert.deepEqual(names(await c.sk.get('/templates?sort=bogus&dir=asc'))[0], 'Alpha receipt');
    assert.deepEqual(names(await c.sk.get('/templates?sort=bogus&dir=sideways'))[0], 'Epsilon ping');
  });

  test("another project's templates are never listed", async () => {
    const res = await b.sk.get('/templates?search=receipt');
    assert.equal(res.body.total, 0);
  });
});

describe('duplicate, usage, delete', () => {
  test('duplicate → 201 with a new template named "<name> (copy)"', async () => {
    const t = await create(a.sk, { name: 'Invoice', description: 'd', fromName: 'Billing', replyTo: 'r@acme.test', type: 'TRANSACTIONAL' });
    const res = await a.sk.post(`/templates/${t.id}/duplicate`);
    assert.equal(res.status, 201, res.text);
    assert.notEqual(res.body.id, t.id);
    assert.equal(res.body.name, 'Invoice (copy)');
    for (const k of ['description', 'subject', 'body', 'from', 'fromName', 'replyTo', 'type', 'projectId']) {
      assert.equal(res.body[k], t[k], k);
    }
    assert.ok(res.body.createdAt > t.createdAt);
    const got = await a.sk.get(`/templates/${res.body.id}`);
    assert.equal(got.status, 200);
    assert.equal(got.body.name, 'Invoice (copy)');
  });

  test('usage lists the campaigns and workflow steps registered providers report', async () => {
    const t = await create(a.sk, { name: 'Used' });
    const free = await a.sk.get(`/templates/${t.id}/usage`);
    assert.equal(free.status, 200);
    assert.deepEqual(free.body, { campaigns: [], workflows: [] });

    const real = usageOf.templateUsers;
    const provider = mock.method(usageOf, 'templateUsers', async (...args: Parameters<typeof real>) =>
      args[1] === a.project.id && args[2] === t.id
        ? {
            campaigns: [{ id: 'c1', name: 'Spring launch' }],
            workflows: [{ id: 'w1', name: 'Onboarding', stepId: 's1' }],
          }
        : real(...args),
    );
    try {
      const used = await a.sk.get(`/templates/${t.id}/usage`);
      assert.deepEqual(used.body, {
        campaigns: [{ id: 'c1', name: 'Spring launch' }],
        workflows: [{ id: 'w1', name: 'Onboarding', stepId: 's1' }],
      });
      const refused = await a.sk.delete(`/templates/${t.id}`);
      assert.equal(refused.status, 409);
      assert.equal(refused.body.error.code, 'CONFLICT');
      assert.match(refused.body.error.message, /Spring launch/);
      assert.deepEqual(refused.body.error.details.campaigns, [{ id: 'c1', name: 'Spring launch' }]);
      assert.equal((await a.sk.get(`/templates/${t.id}`)).status, 200);
    } finally {
      provider.mock.restore();
    }
    const deleted = await a.sk.delete(`/templates/${t.id}`);
    assert.equal(deleted.status, 204);
    assert.equal(deleted.text, '');
    const gone = await a.sk.get(`/templates/${t.id}`);
    assert.equal(gone.status, 404);
    assert.equal(gone.body.error.code, 'TEMPLATE_NOT_FOUND');
  });

  test('a domain cannot be deleted while a template sends from it', async () => {
    const d = await verifyDomain(a.sk, dns, 'keep.test');
    const t = await create(a.sk, { name: 'Keeper', from: 'x@news.keep.test' });
    const refused = await a.sk.delete(`/domains/${d.id}`);
    assert.equal(refused.status, 409, refused.text);
    assert.match(refused.body.error.message, /template "Keeper"/);
    assert.equal((await a.sk.delete(`/templates/${t.id}`)).status, 204);
    assert.equal((await a.sk.delete(`/domains/${d.id}`)).status, 204);
  });
});

describe('not found', () => {
  test('unknown, other-project and malformed ids → 404 TEMPLATE_NOT_FOUND on every route', async () => {
    const theirs = await create(b.sk, { from: 'x@beta.test' });
    for (const id of [MISSING_UUID, theirs.id, 'not-a-uuid', '123']) {
      const calls = [
        a.sk.get(`/templates/${id}`),
        a.sk.patch(`/templates/${id}`, { name: 'x' }),
        a.sk.delete(`/templates/${id}`),
        a.sk.post(`/templates/${id}/duplicate`),
        a.sk.get(`/templates/${id}/usage`),
      ];
      for (const res of await Promise.all(calls)) {
        assert.equal(res.status, 404, `${id}: ${res.text}`);
        assert.equal(res.body.error.code, 'TEMPLATE_NOT_FOUND');
        assert.deepEqual(res.body.error.details, { resource: 'template', id });
      }
    }
    assert.equal((await b.sk.get(`/templates/${theirs.id}`)).status, 200, 'still there for its owner');
  });

  test('without a key → 401', async () => {
    const res = await server.api.get('/templates');
    assert.equal(res.status, 401);
    assert.equal(res.body.error.code, 'INVALID_API_KEY');
  });
});
