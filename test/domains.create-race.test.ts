import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ApiError } from '../src/http/errors.ts';
import { keyTurns } from '../src/modules/domains/key-slots.ts';
import { MAX_DOMAINS_PER_PROJECT } from '../src/modules/domains/service.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

let server: TestServer;
let attacker: Bootstrapped;
let victim: Bootstrapped;

before(async () => {
  server = await startTestServer();
  attacker = await bootstrap(server.api, 'Attacker');
  victim = await bootstrap(server.api, 'Victim');
});
after(async () => {
  await server?.stop();
});

type Res = { status: number; body: any; text: string; headers: Headers }; // eslint-disable-line @typescript-eslint/no-explicit-any

const storedDomains = async (projectId: string) =>
  (await server.sql<{ n: number }>('SELECT count(*)::int AS n FROM domains WHERE project_id = $1', [projectId]))[0].n;

const timed = async <T>(work: () => Promise<T>): Promise<{ result: T; ms: number }> => {
  const started = performance.now();
  const result = await work();
  return { result, ms: performance.now() - started };
};

/** A wrong password for an unknown email: one argon2 verification on the threadpool. */
const failedLogin = () => server.api.post('/auth/login', { email: 'nobody@example.test', password: 'wrong password here' });

function assertKeysBusy(res: Res): void {
  assert.equal(res.status, 429, res.text.slice(0, 300));
  assert.equal(res.headers.get('retry-after'), '1');
  assert.equal(res.body.success, false);
  assert.equal(res.body.error.code, 'RATE_LIMIT_EXCEEDED');
  assert.equal(res.body.error.statusCode, 429);
  assert.ok(
    ['This project is already adding domains; try again in 1 second', 'The server is busy adding domains; try again in 1 second'].includes(
      res.body.error.message,
    ),
    res.body.error.message,
  );
  assert.equal(res.body.error.details.retryAfter, 1);
}

describe('concurrent domain adds', () => {
  test("600 at once from one project take turns at key generation: another tenant's login stays fast and its add goes through", async () => {
    const baseline = await timed(failedLogin);
    assert.equal(baseline.result.status, 401, baseline.result.text);

    const burst = Promise.all(Array.from({ length: 600 }, (_, i) => attacker.sk.post('/domains', { domain: `d${i}.attacker.example` })));
    await new Promise((r) => setTimeout(r, 300));
    const victimAdd = await victim.sk.post('/domains', { domain: 'victim.example' });
    const login = await timed(failedLogin);
    const answers = await burst;

    // Before: every add generated an RSA key (50 kept, 550 refused 403 afterwards) on the 4 libuv
    // threads argon2 needs too: the login took 8-15 s and the burst 17-41 s. (The victim's add waits
    // behind the burst's 600 requests either way, ~1-2 s on a loaded 2-core machine: no timing here.)
    assert.equal(login.result.status, 401, login.result.text);
    assert.ok(login.ms < 1500, `login during the burst took ${Math.round(login.ms)} ms (idle: ${Math.round(baseline.ms)} ms)`);
    assert.equal(victimAdd.status, 201, victimAdd.text);
    assert.equal(victimAdd.body.domain, 'victim.example');

    const byStatus = new Map<number, Res[]>();
    for (const res of answers) byStatus.set(res.status, [...(byStatus.get(res.status) ?? []), res]);
    // A project has 100 adds under way at most, taking turns at one key at a time: the rest are
    // refused at once; of those admitted, the first 50 add a domain and the rest get the cap's 403
    // at their turn without generating a key.
    assert.deepEqual(
      [...byStatus.keys()].filter((s) => s !== 201 && s !== 403 && s !== 429),
      [],
    );
    assert.equal(byStatus.get(201)?.length, MAX_DOMAINS_PER_PROJECT);
    assert.ok((byStatus.get(429)?.length ?? 0) >= 400, `refused busy: ${byStatus.get(429)?.length ?? 0}`);
    for (const res of byStatus.get(429) ?? []) assertKeysBusy(res);
    for (const res of byStatus.get(403) ?? []) assert.deepEqual(res.body.error.details, { limit: MAX_DOMAINS_PER_PROJECT });
    assert.equal(await storedDomains(attacker.project.id), MAX_DOMAINS_PER_PROJECT);
  });

  test('a project one short of its cap racing 30 adds gets exactly one more domain', async () => {
    const racer = await bootstrap(server.api, 'Racer');
    const first = await racer.sk.post('/domains', { domain: 'pre0.racer.example' });
    assert.equal(first.status, 201, first.text);
    // Copies of the first (with its key) up to one short of the cap, without generating 48 keys.
    await server.sql(
      `INSERT INTO domains (id, project_id, domain, status, dkim_selector, dkim_public_key, dkim_private_key_enc, records, created_at)
       SELECT gen_random_uuid(), project_id, 'pre' || g || '.racer.example', status, dkim_selector, dkim_public_key, dkim_private_key_enc, records, created_at
         FROM domains, generate_series(1, $2::int) g WHERE id = $1`,
      [first.body.id, MAX_DOMAINS_PER_PROJECT - 2],
    );
    assert.equal(await storedDomains(racer.project.id), MAX_DOMAINS_PER_PROJECT - 1);

    // Sequential rounds of concurrent adds until every one has an answer other than 429.
    const answers: Res[] = [];
    let pending = Array.from({ length: 30 }, (_, i) => `race${i}.racer.example`);
    while (pending.length > 0) {
      const round = await Promise.all(pending.map((domain) => racer.sk.post('/domains', { domain }).then((res) => ({ domain, res }))));
      answers.push(...round.filter((r) => r.res.status !== 429).map((r) => r.res));
      pending = round.filter((r) => r.res.status === 429).map((r) => r.domain);
    }
    const added = answers.filter((r) => r.status === 201);
    assert.equal(added.length, 1);
    for (const res of answers.filter((r) => r.status !== 201)) {
      assert.equal(res.status, 403, res.text);
      assert.equal(res.body.error.code, 'FORBIDDEN');
      assert.equal(res.body.error.message, `A project can have at most ${MAX_DOMAINS_PER_PROJECT} domains; delete one first`);
      assert.deepEqual(res.body.error.details, { limit: MAX_DOMAINS_PER_PROJECT });
    }
    assert.equal(await storedDomains(racer.project.id), MAX_DOMAINS_PER_PROJECT);
  });

  test('the same domain added twice at once is stored once', async () => {
    const twin = await bootstrap(server.api, 'Twin');
    const [a, b] = await Promise.all([twin.sk.post('/domains', { domain: 'twin.example' }), twin.sk.post('/domains', { domain: 'twin.example' })]);
    assert.deepEqual([a.status, b.status].sort(), [201, 409]);
    const conflict = a.status === 409 ? a : b;
    assert.equal(conflict.body.error.code, 'CONFLICT');
    assert.equal(conflict.body.error.message, 'Domain twin.example is already added to this project');
    assert.equal(await storedDomains(twin.project.id), 1);
  });
});

describe('key generation turns', () => {
  const refusal = (message: string, limit: number) => (err: unknown) => {
    assert.ok(err instanceof ApiError);
    assert.equal(err.statusCode, 429);
    assert.equal(err.code, 'RATE_LIMIT_EXCEEDED');
    assert.equal(err.message, `${message}; try again in 1 second`);
    assert.deepEqual(err.details, { retryAfter: 1, limit });
    return true;
  };

  test('run one at a time, in rotation across projects, bounded per project and per process', async () => {
    const turns = keyTurns(1, 6, 3);
    const started: string[] = [];
    const finish = new Map<string, () => void>();
    let running = 0;
    let mostAtOnce = 0;
    const work = (name: string) => async () => {
      running++;
      mostAtOnce = Math.max(mostAtOnce, running);
      started.push(name);
      await new Promise<void>((resolve) => finish.set(name, resolve));
      running--;
      return name;
    };
    const runs = [turns.run('a', work('a1')), turns.run('a', work('a2')), turns.run('a', work('a3'))];
    await assert.rejects(turns.run('a', work('a4')), refusal('This project is already adding domains', 3));
    runs.push(turns.run('b', work('b1')), turns.run('c', work('c1')), turns.run('d', work('d1')));
    await assert.rejects(turns.run('e', work('e1')), refusal('The server is busy adding domains', 6));
    assert.equal(turns.inFlight(), 6);
    assert.equal(turns.inFlight('a'), 3);

    for (let i = 0; i < runs.length; i++) {
      while (started.length <= i) await new Promise((r) => setImmediate(r));
      finish.get(started[i])!();
    }
    await Promise.all(runs);
    // a1 ran at once; a2 was first in line, then every other project had its turn before a3.
    assert.deepEqual(started, ['a1', 'a2', 'b1', 'c1', 'd1', 'a3']);
    assert.equal(mostAtOnce, 1);
    assert.equal(turns.inFlight(), 0);
    // A failing add gives its turn back.
    await assert.rejects(
      turns.run('a', async () => {
        throw new Error('boom');
      }),
      /boom/,
    );
    assert.equal(await turns.run('a', async () => 'again'), 'again');
    assert.equal(turns.inFlight(), 0);
  });
});
