import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { SUPPRESSION_SEARCH_INDEX } from '../src/db/search-index.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { TestDns } from './helpers/dns-server.ts';
import { verifyDomain } from './helpers/domains.ts';
import type { SmtpSink } from './helpers/smtp-sink.ts';
import type { TestServer } from './helpers/server.ts';
import { startMailEnv, waitForStatus } from './helpers/mail.ts';

const FROM = 'hello@mail.example.test';
let dns: TestDns;
let sink: SmtpSink;
let server: TestServer;
let b: Bootstrapped;

before(async () => {
  ({ dns, sink, server } = await startMailEnv());
  b = await bootstrap(server.api);
  await verifyDomain(b.sk, dns, 'mail.example.test');
});
after(async () => {
  await server?.stop();
  await sink?.stop();
  await dns?.stop();
});

/** A hard bounce through the relay: the sink refuses the recipient with 550. */
async function hardBounce(to: string) {
  sink.failNext({ stage: 'rcpt', code: 550, message: '5.1.1 no such user' });
  const res = await b.sk.post('/v1/send', { to, from: FROM, subject: 'x', body: 'b', subscribed: true });
  assert.equal(res.status, 200, res.text);
  const email = await waitForStatus(b.sk, res.body.data.emails[0].email, ['BOUNCED']);
  return { emailId: email.id as string, contactId: res.body.data.emails[0].contact.id as string };
}

async function insertSuppressions(projectId: string, rows: { email: string; reason: string; minutesAgo: number }[]) {
  for (const r of rows) {
    await server.sql(`INSERT INTO suppressions (project_id, email, reason, created_at) VALUES ($1, $2, $3, now() - make_interval(mins => $4))`, [
      projectId,
      r.email,
      r.reason,
      r.minutesAgo,
    ]);
  }
}

describe('GET /suppressions', () => {
  test('a hard bounce from the relay suppresses the address and unsubscribes the contact with its reason', async () => {
    const { emailId, contactId } = await hardBounce('Gone@Example.org');
    const list = await b.sk.get('/suppressions');
    assert.equal(list.status, 200, list.text);
    assert.equal(list.body.total, 1);
    assert.equal(list.body.hasMore, false);
    assert.equal(list.body.cursor, undefined);
    assert.equal(list.body.data.length, 1);
    const [entry] = list.body.data;
    assert.equal(entry.email, 'gone@example.org');
    assert.equal(entry.reason, 'bounce');
    assert.equal(entry.emailId, emailId);
    assert.ok(!Number.isNaN(Date.parse(entry.createdAt)));
    assert.equal((await b.sk.get(`/contacts/${contactId}`)).body.subscribed, false);
    const events = await server.sql<{ name: string; data: Record<string, unknown> }>(
      `SELECT name, data FROM events WHERE contact_id = $1 AND name IN ('email.bounced', 'contact.unsubscribed') ORDER BY created_at, id`,
      [contactId],
    );
    assert.deepEqual(events, [
      { name: 'email.bounced', data: { emailId, subject: 'x', bounceType: 'Permanent', error: '550 5.1.1 no such user' } },
      { name: 'contact.unsubscribed', data: { reason: 'bounce' } },
    ]);
  });

  test('cursor pages, newest first, every entry once; filters by reason and search', async () => {
    const p = await bootstrap(server.api, 'paging');
    const rows = Array.from({ length: 25 }, (_, i) => ({
      email: `user${String(i).padStart(2, '0')}@list.example`,
      reason: i % 5 === 0 ? 'complaint' : 'bounce',
      minutesAgo: i < 10 ? 5 : 100 - i, // ten share one timestamp: the email breaks the tie
    }));
    await insertSuppressions(p.project.id, rows);

    const seen: string[] = [];
    let cursor: string | undefined;
    let first = true;
    do {
      const res = await p.sk.get(`/suppressions?limit=10${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(res.status, 200, res.text);
      if (first) assert.equal(res.body.total, 25);
      first = false;
      assert.ok(res.body.data.length <= 10);
      seen.push(...res.body.data.map((s: { email: string }) => s.email));
      cursor = res.body.cursor;
      assert.equal(res.body.hasMore, cursor !== undefined);
    } while (cursor);
    assert.equal(seen.length, 25);
    assert.equal(new Set(seen).size, 25);
    const expected = [...rows].sort((a, b) => a.minutesAgo - b.minutesAgo || (a.email < b.email ? 1 : -1)).map((r) => r.email);
    assert.deepEqual(seen, expected);

    const complaints = await p.sk.get('/suppressions?reason=complaint&limit=100');
    assert.deepEqual(complaints.body.data.map((s: { email: string }) => s.email).sort(), [
      'user00@list.example',
      'user05@list.example',
      'user10@list.example',
      'user15@list.example',
      'user20@list.example',
    ]);
    assert.equal(complaints.body.total, 5);
    const search = await p.sk.get('/suppressions?search=USER1');
    assert.equal(search.body.total, 10);
    // A page that holds every match, and one that does not (its total counted).
    for (const limit of [10, 3]) {
      const page = await p.sk.get(`/suppressions?search=USER1&limit=${limit}`);
      assert.deepEqual([page.body.data.length, page.body.total, page.body.hasMore], [limit, 10, limit < 10], `limit ${limit}`);
    }
    const literal = await p.sk.get(`/suppressions?search=${encodeURIComponent('user_')}`);
    assert.equal(literal.body.total, 0, 'search is a literal substring, not a LIKE pattern');
  });

  test('bad parameters: limit 0 → 422, unknown reason → 422, garbage cursor → 400', async () => {
    const zero = await b.sk.get('/suppressions?limit=0');
    assert.equal(zero.status, 422);
    assert.equal(zero.body.error.errors[0].field, 'limit');
    const reason = await b.sk.get('/suppressions?reason=spam');
    assert.equal(reason.status, 422);
    assert.equal(reason.body.error.errors[0].code, 'invalid_enum_value');
    const cursor = await b.sk.get('/suppressions?cursor=not-a-cursor');
    assert.equal(cursor.status, 400);
    const big = await b.sk.get('/suppressions?limit=1000');
    assert.equal(big.status, 200, 'limits above 100 are clamped');
  });

  test('authentication: a missing key and a public key are 401, another project sees nothing', async () => {
    assert.equal((await server.api.get('/suppressions')).status, 401);
    const pk = await b.pk.get('/suppressions');
    assert.equal(pk.status, 401);
    assert.equal(pk.body.error.code, 'INVALID_API_KEY');
    const other = await bootstrap(server.api, 'other');
    const list = await other.sk.get('/suppressions');
    assert.equal(list.body.total, 0);
    const del = await other.sk.delete('/suppressions/gone@example.org');
    assert.equal(del.status, 404);
    assert.equal(
      (await b.sk.get('/suppressions')).body.data.some((s: { email: string }) => s.email === 'gone@example.org'),
      true,
    );
  });

  test('the dashboard session with X-Project-Id works too', async () => {
    const res = await server.api.get('/suppressions', { cookie: b.cookie, headers: { 'x-project-id': b.project.id } });
    assert.equal(res.status, 200, res.text);
    assert.ok(res.body.data.some((s: { email: string }) => s.email === 'gone@example.org'));
  });
});

describe('GET /suppressions at 100,000 suppressions', () => {
  test('a search for part of one address reads the trigram index, and the total is counted as before', async () => {
    const p = await bootstrap(server.api, 'many');
    await server.sql(
      `INSERT INTO suppressions (project_id, email, reason, created_at)
       SELECT $1, 'user' || g || '.' || substr(md5(g::text), 1, 6) || '@example.com', CASE WHEN g % 10 = 0 THEN 'complaint' ELSE 'bounce' END, now() - g * interval '1 second'
         FROM generate_series(1, 100000) AS g`,
      [p.project.id],
    );
    await server.sql('ANALYZE suppressions');
    assert.equal((await p.sk.get('/suppressions?limit=1')).body.total, 100_000);
    assert.equal((await p.sk.get('/suppressions?limit=1&reason=complaint')).body.total, 10_000);

    const target = (await server.sql<{ email: string }>(`SELECT email FROM suppressions WHERE project_id = $1 AND email LIKE 'user12345.%'`, [p.project.id]))[0]
      .email;
    const part = target.slice(0, target.indexOf('@')).slice(-8).toUpperCase(); // "345.xxxxxx", case-insensitive
    const found = await p.sk.get(`/suppressions?search=${encodeURIComponent(part)}`);
    assert.equal(found.status, 200, found.text);
    assert.deepEqual(
      found.body.data.map((s: { email: string }) => s.email),
      [target],
    );
    assert.equal(found.body.total, 1);
    // The list's page and count, as service.ts writes them: the index's matches, not a read of 100,000 rows.
    const pattern = `%${part.toLowerCase()}%`;
    for (const query of [
      `SELECT count(*) FROM suppressions WHERE project_id = $1 AND email ILIKE $2`,
      `SELECT * FROM suppressions WHERE project_id = $1 AND email ILIKE $2 ORDER BY created_at DESC, email DESC LIMIT 51`,
    ]) {
      const plan = (await server.sql<{ 'QUERY PLAN': string }>(`EXPLAIN ${query}`, [p.project.id, pattern])).map((r) => r['QUERY PLAN']).join('\n');
      assert.match(plan, new RegExp(`Bitmap Index Scan on ${SUPPRESSION_SEARCH_INDEX}`), plan);
    }
  });
});

describe('GET /suppressions/:email', () => {
  test("one address's suppression whatever its case, with the email that caused it; 404 when it is not suppressed, and in another project", async () => {
    const { emailId } = await hardBounce('Looked@Example.org');
    const res = await b.sk.get(`/suppressions/${encodeURIComponent('LOOKED@example.ORG')}`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual({ ...res.body, createdAt: typeof res.body.createdAt }, { email: 'looked@example.org', reason: 'bounce', emailId, createdAt: 'string' });

    const none = await b.sk.get('/suppressions/nobody@example.org');
    assert.equal(none.status, 404);
    assert.equal(none.body.error.code, 'SUPPRESSION_NOT_FOUND');
    const other = await bootstrap(server.api, 'Other');
    assert.equal((await other.sk.get('/suppressions/looked@example.org')).status, 404);
  });
});

describe('DELETE /suppressions/:email', () => {
  test('204 with an empty body; the address receives mail again (the contact stays unsubscribed)', async () => {
    const { contactId } = await hardBounce('back@example.org');
    const blocked = await b.sk.post('/v1/send', { to: 'back@example.org', from: FROM, subject: 's', body: 'b' });
    assert.equal(blocked.body.data.emails[0].status, 'SUPPRESSED');

    const bounces = async () => (await b.sk.get('/suppressions?reason=bounce')).body.total as number;
    const before = await bounces();
    const del = await b.sk.delete(`/suppressions/${encodeURIComponent('Back@Example.org')}`);
    assert.equal(del.status, 204);
    assert.equal(del.text, '');
    const list = await b.sk.get('/suppressions?search=back@');
    assert.equal(list.body.total, 0);
    assert.equal(await bounces(), before - 1, 'the total counts the delete');
    assert.equal((await b.sk.get(`/contacts/${contactId}`)).body.subscribed, false);

    const received = sink.messages.filter((m) => m.envelope.to.includes('back@example.org')).length;
    const again = await b.sk.post('/v1/send', { to: 'back@example.org', from: FROM, subject: 'welcome back', body: 'b' });
    assert.equal(again.body.data.emails[0].status, 'QUEUED');
    await waitForStatus(b.sk, again.body.data.emails[0].email, ['SENT']);
    assert.equal(sink.messages.filter((m) => m.envelope.to.includes('back@example.org')).length, received + 1);
  });

  test('an address that is not suppressed → 404 SUPPRESSION_NOT_FOUND', async () => {
    const res = await b.sk.delete('/suppressions/nobody@example.org');
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'SUPPRESSION_NOT_FOUND');
    assert.deepEqual(res.body.error.details, { resource: 'suppression', id: 'nobody@example.org' });
    const again = await b.sk.delete('/suppressions/back@example.org');
    assert.equal(again.status, 404, 'deleting twice: the second is 404');
  });
});

describe('delivery to a suppressed address', () => {
  test('an email queued before the address was suppressed is recorded SUPPRESSED by the worker, not delivered', async () => {
    await insertSuppressions(b.project.id, [{ email: 'late@example.org', reason: 'complaint', minutesAgo: 0 }]);
    const id = randomUUID();
    await server.sql(
      `WITH c AS (INSERT INTO email_contents (id, project_id, body_source) VALUES (gen_random_uuid(), $2, '<p>b</p>') RETURNING id)
       INSERT INTO emails (id, project_id, to_email, from_email, type, subject_source, content_id, status)
       VALUES ($1, $2, 'late@example.org', $3, 'TRANSACTIONAL', 'queued earlier', (SELECT id FROM c), 'QUEUED')`,
      [id, b.project.id, FROM],
    );
    await server.ctx.jobs.send('email-delivery', { emailIds: [id] });
    const email = await waitForStatus(b.sk, id, ['SUPPRESSED', 'SENT', 'FAILED']);
    assert.equal(email.status, 'SUPPRESSED');
    assert.equal(email.sentAt, null);
    assert.equal(
      sink.messages.some((m) => m.envelope.to.includes('late@example.org')),
      false,
    );
  });
});
