import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import pino from 'pino';
import { listenOn } from '../src/db/listen.ts';
import { createTestDatabase } from './helpers/server.ts';

/**
 * The LISTEN connection behind the key cache's evictions and the workers' job notices
 * (db/listen.ts): a lost connection is reported and replaced, however many attempts that takes
 * (the first version tried once: a database that refused that one attempt ended the listening).
 */

let url: string;
// One connection to the database, opened before it refuses new ones, and one to the cluster's own.
let admin: pg.Client;
let cluster: pg.Client;
before(async () => {
  url = await createTestDatabase();
  admin = new pg.Client({ connectionString: url });
  await admin.connect();
  cluster = new pg.Client({ connectionString: process.env.HERALD_TEST_PG_URL });
  await cluster.connect();
});
after(async () => {
  await admin?.end();
  await cluster?.end();
});

const notify = (payload: string) => admin.query(`SELECT pg_notify('test_channel', $1)`, [payload]);
const terminate = () =>
  admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'herald-test-listen' AND pid <> pg_backend_pid()`);

async function until(what: string, ok: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) assert.fail(`${what} did not happen within ${ms} ms`);
    await sleep(20);
  }
}

test('notifications arrive; a lost connection is reported and replaced, and later ones arrive again', async () => {
  const heard: string[] = [];
  let lost = 0;
  const listening = await listenOn({
    url,
    channel: 'test_channel',
    applicationName: 'herald-test-listen',
    log: pino({ level: 'silent' }),
    onPayload: (p) => heard.push(p),
    onLost: () => lost++,
  });
  try {
    await notify('first');
    await until('the first notification', () => heard.includes('first'));

    // Lost while the database refuses connections: its attempts fail until it takes them again.
    const database = new URL(url).pathname.slice(1);
    await cluster.query(`ALTER DATABASE "${database}" ALLOW_CONNECTIONS false`);
    try {
      await terminate();
      await until('the loss to be reported', () => lost === 1);
      await sleep(2500); // two attempts, both refused
    } finally {
      await cluster.query(`ALTER DATABASE "${database}" ALLOW_CONNECTIONS true`);
    }
    let delivered = false;
    for (let i = 0; i < 100 && !delivered; i++) {
      await notify('after');
      await sleep(100);
      delivered = heard.includes('after');
    }
    assert.ok(delivered, `no notification after the losses (reported ${lost})`);
    assert.ok(lost >= 1);
  } finally {
    await listening.close();
  }
  // Closed: nothing more is heard, and no connection is left.
  await notify('closed');
  await sleep(200);
  assert.ok(!heard.includes('closed'));
  const { rows } = await admin.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'herald-test-listen'`);
  assert.equal(rows[0].n, 0);
});
