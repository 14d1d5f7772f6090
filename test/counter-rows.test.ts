import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { storageMaintenanceQueue } from '../src/modules/retention/jobs.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/**
 * The trigger-kept counters have a row per writing backend (db/counter-rows.ts): no two live
 * transactions write one row, so a transaction holding a counter row never holds up another.
 * Hourly storage maintenance folds the rows of exited backends into one; the totals do not move.
 */

let server: TestServer;
let b: Bootstrapped;
before(async () => {
  server = await startTestServer({ PROCESS_ROLE: 'api' });
  b = await bootstrap(server.api);
});
after(async () => server?.stop());

const send = async (to: string) => {
  const res = await b.sk.post('/v1/send', { to, from: 'a@sandbox.herald.test', subject: 'Hi', body: '<p>Hi</p>', subscribed: true });
  assert.equal(res.status, 200, res.text);
  return res.body.data.emails[0].email as string;
};
/** A connection of its own, as another Herald process's would be: its backend writes its own counter rows. */
const connect = async () => {
  const client = new pg.Client({ connectionString: server.databaseUrl });
  await client.connect();
  const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  return { client, pid: rows[0].pid };
};
const rowsOf = async () =>
  (
    await server.sql<{ status: string; shard: number; count: string }>(
      `SELECT status, shard, count FROM email_counts WHERE project_id = $1 ORDER BY status, shard`,
      [b.project.id],
    )
  ).map((r) => [r.status, r.shard, Number(r.count)]);
const totals = async () => {
  const out: Record<string, number> = {};
  for (const status of ['QUEUED', 'SKIPPED', 'FAILED']) out[status] = (await b.sk.get(`/emails?status=${status}`)).body.total;
  return { all: (await b.sk.get('/emails')).body.total as number, ...out };
};

test("concurrent writers never wait on one counter row; an exited backend's rows are folded into shard 0, a live one's left", async () => {
  const ids = [await send('a@x.test'), await send('b@x.test'), await send('c@x.test')];
  const before = await totals();
  assert.deepEqual(before, { all: 3, QUEUED: 3, SKIPPED: 0, FAILED: 0 });

  // Two transactions change the same statuses of one project at once, each holding its counter rows
  // until it commits: the second does not wait for the first (a statement timeout would end it).
  // The second connection's pid is chosen equal to the first's modulo 16: where writers shared 16
  // rows by pid, these two would queue on one (and could deadlock with whatever else they locked).
  const one = await connect();
  let two = await connect();
  for (let tries = 0; two.pid % 16 !== one.pid % 16; tries++) {
    assert.ok(tries < 200, 'no backend of the same pid modulo 16');
    await two.client.end();
    two = await connect();
  }
  await one.client.query('BEGIN');
  await one.client.query(`UPDATE emails SET status = 'SKIPPED' WHERE id = $1`, [ids[0]]);
  await two.client.query(`SET statement_timeout = '2s'`);
  await two.client.query('BEGIN');
  await two.client.query(`UPDATE emails SET status = 'SKIPPED' WHERE id = $1`, [ids[1]]);
  await two.client.query('COMMIT');
  // While `one` is still open, a third backend writes and exits, and maintenance runs.
  const exited = await connect();
  await exited.client.query(`UPDATE emails SET status = 'FAILED' WHERE id = $1`, [ids[2]]);
  await exited.client.end();
  await two.client.end();
  for (let i = 0; i < 100; i++) {
    const gone = await server.sql(`SELECT 1 FROM pg_stat_activity WHERE pid = ANY($1)`, [[exited.pid, two.pid]]);
    if (gone.length === 0) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  await storageMaintenanceQueue.handler(server.ctx, {}, { id: 'test' });
  await one.client.query('COMMIT');
  const rows = await rowsOf();
  assert.ok(
    rows.some(([, shard]) => shard === one.pid),
    'a live backend keeps its rows',
  );
  assert.ok(!rows.some(([, shard]) => shard === exited.pid || shard === two.pid), JSON.stringify(rows));
  assert.ok(
    rows.some(([, shard]) => shard === 0),
    "the exited backends' counts are in shard 0",
  );
  await one.client.end();

  assert.deepEqual(await totals(), { all: 3, QUEUED: 0, SKIPPED: 2, FAILED: 1 });
  // Once every writer has gone (the server's own connections included, when it stops), one row per status is left.
  await storageMaintenanceQueue.handler(server.ctx, {}, { id: 'test' });
  const live = new Set((await server.sql<{ pid: number }>('SELECT pid FROM pg_stat_activity')).map((r) => r.pid));
  for (const [status, shard] of await rowsOf()) assert.ok(shard === 0 || live.has(shard as number), `${status} ${shard}`);
  assert.deepEqual(await totals(), { all: 3, QUEUED: 0, SKIPPED: 2, FAILED: 1 });
});

test("the event counters and the tracked events' day rollup fold the same way (migration 0020)", async () => {
  const day = new Date().toISOString().slice(0, 10);
  const track = async () => {
    const res = await b.pk.post('/v1/track', { email: 'ada@x.test', event: 'signup' });
    assert.equal(res.status, 200, res.text);
  };
  const observed = async () => {
    const events = await b.sk.get('/events?name=signup');
    const top = await b.sk.get(`/analytics/top-events?from=${day}&to=${day}`);
    return { total: events.body.total as number, top: top.body.data.find((r: { name: string }) => r.name === 'signup')?.count as number };
  };
  await track();
  // Another process's backend writes the same name (its event, and the rollup row the event writer adds) and exits.
  const exited = await connect();
  await exited.client.query(`INSERT INTO events (id, project_id, name) VALUES ('evt_exited', $1, 'signup')`, [b.project.id]);
  await exited.client.query(`INSERT INTO event_name_days (project_id, name, day, shard, count) VALUES ($1, 'signup', $2, pg_backend_pid(), 1)`, [
    b.project.id,
    day,
  ]);
  await exited.client.end();
  for (let i = 0; i < 100 && (await server.sql(`SELECT 1 FROM pg_stat_activity WHERE pid = $1`, [exited.pid])).length > 0; i++) {
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.deepEqual(await observed(), { total: 2, top: 2 });
  const shards = async (table: string) =>
    (await server.sql<{ shard: number }>(`SELECT shard FROM ${table} WHERE project_id = $1 AND name = 'signup' ORDER BY shard`, [b.project.id])).map(
      (r) => r.shard,
    );
  for (const table of ['event_counts', 'event_day_counts', 'event_name_days']) assert.ok((await shards(table)).includes(exited.pid), table);

  await storageMaintenanceQueue.handler(server.ctx, {}, { id: 'test' });
  for (const table of ['event_counts', 'event_day_counts', 'event_name_days']) {
    const left = await shards(table);
    assert.ok(!left.includes(exited.pid) && left.includes(0), `${table}: ${left}`);
  }
  assert.deepEqual(await observed(), { total: 2, top: 2 });
});
