import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { removeTempDataDirs, tempDataDir } from './helpers/data-dir.ts';

/**
 * The event path does not depend on which modules a process loaded: a tracked event re-evaluates
 * tracked segments the same way whether one process serves HTTP and runs the queues, or an API
 * process and a worker process (PROCESS_ROLE=api / worker) share the database, and also when the
 * worker itself records the event.
 */

const one = (field: string, operator: string) => ({ logic: 'AND', groups: [{ filters: [{ field, operator }] }] });

const servers: TestServer[] = [];
const children: ChildProcess[] = [];
const logs: string[] = [];
after(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  for (const s of servers) await s.stop();
  await removeTempDataDirs();
});

async function spawnHerald(script: string, env: Record<string, string>): Promise<ChildProcess> {
  const dataDir = await tempDataDir('herald-role-');
  const child = spawn(process.execPath, [script], {
    cwd: path.resolve(import.meta.dirname, '..'),
    env: { PATH: process.env.PATH, HOME: process.env.HOME, JWT_SECRET: 'test-secret-0123456789abcdef', DATA_DIR: dataDir, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (d: Buffer) => logs.push(d.toString()));
  child.stderr?.on('data', (d: Buffer) => logs.push(d.toString()));
  children.push(child);
  return child;
}

async function eventually<T>(what: string, probe: () => Promise<T>, ok: (v: T) => boolean, ms = 90_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (ok(v)) return v;
    if (Date.now() > until) assert.fail(`${what}: still ${JSON.stringify(v)}; child output: ${logs.join('').slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

type Outcome = { events: string[]; members: string[]; memberCount: number };

/** A tracked segment on `purchase`, a contact, and `track` recording the event; what the contact ends up with. */
async function scenario(server: TestServer, p: Bootstrapped, track: (email: string) => Promise<void>): Promise<Outcome> {
  const email = 'buyer@example.com';
  assert.equal((await p.sk.post('/contacts', { email })).status, 201);
  const seg = await p.sk.post('/segments', { name: 'Buyers', condition: one('event.purchase', 'triggered'), trackMembership: true });
  assert.equal(seg.status, 201, seg.text);
  await track(email);
  const events = await eventually(
    'segment.buyers.entry',
    async () =>
      (
        await server.sql<{ name: string }>(
          `SELECT e.name FROM events e JOIN contacts c ON c.id = e.contact_id WHERE e.project_id = $1 AND c.email = $2 ORDER BY e.name`,
          [p.project.id, email],
        )
      ).map((r) => r.name),
    (names) => names.includes('segment.buyers.entry'),
  );
  const members = (await p.sk.get(`/segments/${seg.body.id}/contacts`)).body.data.map((c: { email: string }) => c.email);
  const memberCount = (await p.sk.get(`/segments/${seg.body.id}`)).body.memberCount;
  return { events, members, memberCount };
}

describe('process roles', () => {
  test(
    'a tracked event re-evaluates segments the same in one process, in api + worker processes, and from the worker itself',
    { timeout: 600_000 },
    async () => {
      const expected: Outcome = { events: ['purchase', 'segment.buyers.entry'], members: ['buyer@example.com'], memberCount: 1 };

      const combined = await startTestServer();
      servers.push(combined);
      const c = await bootstrap(combined.api, 'combined');
      const viaCombined = await scenario(combined, c, async (email) => {
        assert.equal((await c.pk.post('/v1/track', { email, event: 'purchase' })).status, 200);
      });
      assert.deepEqual(viaCombined, expected);

      // API only (no queue workers) plus a separate worker process on the same database.
      const api = await startTestServer({ PROCESS_ROLE: 'api' });
      servers.push(api);
      const s = await bootstrap(api.api, 'split');
      const worker = await spawnHerald('src/main.ts', { DATABASE_URL: api.databaseUrl, PROCESS_ROLE: 'worker' });
      await eventually(
        'the worker process to start',
        async () => (worker.exitCode === null ? logs.join('') : `exited ${worker.exitCode}`),
        (o) => /Herald worker started|exited/.test(o),
        150_000,
      );
      assert.equal(worker.exitCode, null, logs.join(''));
      const viaSplit = await scenario(api, s, async (email) => {
        assert.equal((await s.pk.post('/v1/track', { email, event: 'purchase' })).status, 200);
      });
      assert.deepEqual(viaSplit, viaCombined);

      // The worker process records the event itself (it never loaded an HTTP route).
      const w = await bootstrap(api.api, 'worker-tracks');
      const viaWorker = await scenario(api, w, async (email) => {
        const child = await spawnHerald('test/helpers/worker-track.ts', {
          DATABASE_URL: api.databaseUrl,
          PROCESS_ROLE: 'worker',
          TRACK_PROJECT_ID: w.project.id,
          TRACK_EMAIL: email,
          TRACK_EVENT: 'purchase',
        });
        let out = '';
        child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
        child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
        await eventually(
          'the worker to track',
          async () => (child.exitCode === null ? out : `exited ${child.exitCode}: ${out}`),
          (o) => o.includes('"tracked"') || o.startsWith('exited'),
          150_000,
        );
        assert.match(out, /"tracked"/);
      });
      assert.deepEqual(viaWorker, viaCombined);
    },
  );
});
