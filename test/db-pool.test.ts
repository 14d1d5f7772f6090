import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type pg from 'pg';
import { type Database, openDatabase } from '../src/db/client.ts';
import { createTestDatabase } from './helpers/server.ts';

/** Herald's connection pool gives back connections it no longer needs one at a time, not all at once. */

let database: Database;

before(async () => {
  database = openDatabase(await createTestDatabase(), 10, { idleMs: 400, everyMs: 100 });
});
after(async () => {
  await database?.close();
});

/** How many of these backends PostgreSQL still has (by pid: an autovacuum worker visiting the database, or a backend the trimmer's later closes left exiting, is not one of them). */
const stillRunning = async (pids: number[]) =>
  (await database.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ANY($1::int[])`, [pids])).rows[0].n;
const pidOf = (client: pg.PoolClient) => (client as pg.PoolClient & { processID: number }).processID;

test('connections a burst opened close one at a time once idle, and those in use stay', async () => {
  const burst = await Promise.all(Array.from({ length: 6 }, () => database.pool.connect()));
  const burstPids = burst.map(pidOf);
  for (const client of burst) client.release();
  assert.equal(database.pool.totalCount, 6);
  // When the trimmer closes each client (release(true)), and when pg-pool reports its connection
  // ended: the spacing is the trimmer's, measured at the first; the second lags it by however long
  // a backend takes to exit, which on a loaded machine varies by more than the spacing.
  const closedAt: number[] = [];
  const removedAt: number[] = [];
  database.pool.on('release', (err) => {
    if (err) closedAt.push(Date.now());
  });
  database.pool.on('remove', () => removedAt.push(Date.now()));
  const start = Date.now();

  // One client stays busy, as steady traffic would keep it.
  const busy = await database.pool.connect();
  const closedPids = burstPids.filter((pid) => pid !== pidOf(busy));
  assert.equal(closedPids.length, 5, 'the busy client is one of the burst');
  try {
    await new Promise((r) => setTimeout(r, 250));
    assert.equal(removedAt.length, 0, 'nothing closes before the pool has been idle for idleMs');
    // pg-pool counts a client out at once and emits 'remove' once its connection has ended: wait for both.
    while ((database.pool.totalCount > 1 || removedAt.length < 5) && Date.now() - start < 5_000) await new Promise((r) => setTimeout(r, 20));
    assert.equal(database.pool.totalCount, 1, 'every idle connection closed; the busy one stayed');
    assert.equal(removedAt.length, 5);
    assert.equal(closedAt.length, 5);
    const gaps = closedAt.slice(1).map((t, i) => t - closedAt[i]);
    assert.ok(
      gaps.every((gap) => gap >= 60),
      `one at a time: ${gaps.join(', ')} ms apart`,
    );
  } finally {
    busy.release();
  }
  // A closed connection's backend exits on its own time (on a loaded machine, after pg-pool's 'remove').
  const deadline = Date.now() + 5_000;
  while ((await stillRunning(closedPids)) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.equal(await stillRunning(closedPids), 0, 'the five closed connections ended their PostgreSQL sessions');
});
