import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { Res } from './helpers/http.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { waitFor } from './helpers/workflows.ts';

/**
 * POST /templates/preview renders on the compose threads (one on a 2-core host), ahead of other
 * work, in one queue: a project has at most two previews under way in a process (all projects
 * together sixteen: test/templates.preview-slots.test.ts). Past that the answer is a 429 at once,
 * so one tenant's previews cannot make another's wait. To keep two previews under way for as long
 * as a test needs, they are asked for a contact while another transaction locks the contacts table.
 */

let server: TestServer;
let a: Bootstrapped;
let b: Bootstrapped;
let adaId = '';

before(async () => {
  server = await startTestServer();
  a = await bootstrap(server.api, 'Heavy previews');
  b = await bootstrap(server.api, 'Bystander');
  const ada = await a.sk.post('/contacts', { email: 'ada@example.test', data: { firstName: 'Ada' } });
  assert.equal(ada.status, 201, ada.text);
  adaId = ada.body.id;
});
after(async () => server?.stop());

/** Valid, and a few tenths of a second on a compose thread (well within the 1 s render budget), with 0.5 M characters of HTML. */
const HEAVY = {
  subject: 'Heavy',
  body: '{% for i in (1..10000) %}<p>{{ i }} &amp; <a href="http://e.com/{{ i }}">l</a></p>{% endfor %}',
};
const HEAVY_HTML = Array.from({ length: 10_000 }, (_, k) => `<p>${k + 1} &amp; <a href="http://e.com/${k + 1}">l</a></p>`).join('');
const TRIVIAL = { subject: 'Hi', body: '<p>Hello {{ email }}</p>' };
const TRIVIAL_ANSWER = { subject: 'Hi', html: '<p>Hello preview@example.com</p>', text: 'Hello preview@example.com' };

async function timed<T>(work: Promise<T>): Promise<{ result: T; ms: number }> {
  const started = performance.now();
  const result = await work;
  return { result, ms: performance.now() - started };
}

/** Locks the contacts table in another transaction; the returned function commits. */
async function lockContacts(): Promise<() => Promise<void>> {
  const client = new pg.Client({ connectionString: server.databaseUrl });
  await client.connect();
  await client.query('BEGIN');
  await client.query('LOCK TABLE contacts IN ACCESS EXCLUSIVE MODE');
  return async () => {
    await client.query('COMMIT');
    await client.end();
  };
}

/** Until `n` statements wait for the lock on the contacts table. */
const contactReadersWaiting = (n: number) =>
  waitFor(
    `${n} statements waiting for the contacts table`,
    async () => {
      const [{ waiting }] = await server.sql<{ waiting: number }>(
        `SELECT count(*)::int AS waiting FROM pg_locks WHERE NOT granted AND locktype = 'relation' AND relation = 'contacts'::regclass`,
      );
      return waiting >= n;
    },
    10_000,
    10,
  );

function assertPreviewsBusy(res: Res): void {
  assert.equal(res.status, 429, res.text.slice(0, 300));
  assert.equal(res.headers.get('retry-after'), '1');
  assert.equal(res.body.success, false);
  assert.equal(res.body.error.code, 'RATE_LIMIT_EXCEEDED');
  assert.equal(res.body.error.statusCode, 429);
  assert.equal(res.body.error.message, 'This project already has 2 previews rendering; try again in 1 second');
  assert.deepEqual(res.body.error.details, { retryAfter: 1, limit: 2 });
}

/** A heavy preview (for Ada) whose client goes away later. */
function abandonedPreview(key: string): { gone: () => void; closed: Promise<void> } {
  const data = JSON.stringify({ ...HEAVY, contactId: adaId });
  const req = http.request(`${server.url}/templates/preview`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) },
  });
  const closed = new Promise<void>((resolve) => req.on('close', () => resolve()));
  req.on('error', () => {});
  req.end(data);
  return { gone: () => req.destroy(), closed };
}

test('past two previews of a project under way, a 429 at once; another project still previews quickly; then the project previews again', async () => {
  const warm = await a.sk.post('/templates/preview', TRIVIAL); // starts the compose thread
  assert.deepEqual(warm.body, TRIVIAL_ANSWER);
  const { result: alone, ms: heavyMs } = await timed(a.sk.post('/templates/preview', HEAVY));
  assert.equal(alone.status, 200, alone.text.slice(0, 300));
  assert.equal(alone.body.html, HEAVY_HTML);

  const unlock = await lockContacts();
  let heavy: Promise<Res>[] = [];
  try {
    heavy = [1, 2].map(() => a.sk.post('/templates/preview', { ...HEAVY, contactId: adaId }));
    await contactReadersWaiting(2);

    // 18 more from the same project while its two are under way: with no per-project share they
    // all queued on the compose thread ahead of everyone else, and the bystander waited behind them.
    const burst = Array.from({ length: 18 }, () => timed(a.sk.post('/templates/preview', HEAVY)));
    await new Promise((r) => setTimeout(r, 200));
    const bystander = await timed(b.sk.post('/templates/preview', TRIVIAL));
    const bound = 3 * heavyMs + 500;
    assert.deepEqual(bystander.result.body, TRIVIAL_ANSWER);
    assert.ok(
      bystander.ms < bound,
      `the other project's preview answered in ${bystander.ms.toFixed(0)} ms (bound ${bound.toFixed(0)}; one heavy preview: ${heavyMs.toFixed(0)} ms)`,
    );
    for (const { result, ms } of await Promise.all(burst)) {
      assertPreviewsBusy(result);
      assert.ok(ms < 1_500, `refused at once, not after rendering (${ms.toFixed(0)} ms)`);
    }
  } finally {
    await unlock();
  }

  // Now the two render on the thread; another project's preview waits behind at most those two.
  const during = await timed(b.sk.post('/templates/preview', TRIVIAL));
  assert.deepEqual(during.result.body, TRIVIAL_ANSWER);
  const bound = 4 * heavyMs + 1_000;
  assert.ok(during.ms < bound, `behind the two heavy previews: ${during.ms.toFixed(0)} ms (bound ${bound.toFixed(0)})`);
  for (const res of await Promise.all(heavy)) {
    assert.equal(res.status, 200, res.text.slice(0, 300));
    assert.equal(res.body.subject, 'Heavy');
    assert.equal(res.body.html, HEAVY_HTML);
  }
  const again = await Promise.all([a.sk.post('/templates/preview', TRIVIAL), a.sk.post('/templates/preview', TRIVIAL)]);
  for (const res of again) assert.deepEqual(res.body, TRIVIAL_ANSWER);
});

test('the slots are given back after a syntax error, an unknown contact and a render limit', async () => {
  for (let i = 0; i < 3; i++) {
    // One slot kept on each path would refuse the third round's requests.
    const syntax = await a.sk.post('/templates/preview', { subject: 'ok', body: '{% if x %}never closed' });
    assert.equal(syntax.status, 422, syntax.text);
    assert.equal(syntax.body.error.errors[0].code, 'invalid_template');
    const unknown = await a.sk.post('/templates/preview', { ...TRIVIAL, contactId: 'cnt_missing' });
    assert.equal(unknown.status, 404, unknown.text);
    assert.equal(unknown.body.error.code, 'CONTACT_NOT_FOUND');
    const runaway = await a.sk.post('/templates/preview', { subject: 'loop', body: '{% for i in (1..100000000) %}x{% endfor %}' });
    assert.equal(runaway.status, 422, runaway.text);
    assert.equal(runaway.body.error.errors[0].code, 'render_limit');
  }
  const ok = await a.sk.post('/templates/preview', TRIVIAL);
  assert.deepEqual(ok.body, TRIVIAL_ANSWER);
});

test('a client that goes away keeps its slot while its preview is under way, and it is given back after', async () => {
  const unlock = await lockContacts();
  try {
    const abandoned = [abandonedPreview(a.project.secretKey), abandonedPreview(a.project.secretKey)];
    await contactReadersWaiting(2);
    for (const preview of abandoned) preview.gone();
    await Promise.all(abandoned.map((p) => p.closed));
    // Their work still goes on (and will still take the thread): a third is refused.
    assertPreviewsBusy(await a.sk.post('/templates/preview', TRIVIAL));
  } finally {
    await unlock();
  }
  const answered = await waitFor(
    'the project to preview again',
    async () => {
      const res = await a.sk.post('/templates/preview', TRIVIAL);
      return res.status === 429 ? null : res;
    },
    10_000,
    50,
  );
  assert.deepEqual(answered.body, TRIVIAL_ANSWER);
});
