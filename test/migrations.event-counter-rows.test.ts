import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { acrossMigration, EVENTS_WITHOUT_FOREIGN_KEYS, seedTwoProjects } from './helpers/migrations.ts';

/**
 * Migration 0020 gives the event counters (event_counts, event_day_counts) and the tracked events'
 * day rollup (event_name_days) a row per writing backend, as email_counts has. With 16 rows per key
 * shared by `pid % 16`, two transactions of one shard writing two event names in opposite orders
 * deadlocked: a permanent bounce records `email.bounced` and then `contact.unsubscribed`, while
 * deleting another contact of the project subtracts its events by name, `contact.unsubscribed`
 * first. The migration keeps every count, and from it on the same two transactions both commit.
 */

const connect = async (url: string) => {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  return { client, pid: rows[0].pid };
};

/** Two backends of equal pid modulo 16: under the old scheme they write the same counter rows. */
async function sameShardPair(url: string) {
  const one = await connect(url);
  let two = await connect(url);
  for (let tries = 0; two.pid % 16 !== one.pid % 16; tries++) {
    assert.ok(tries < 200, 'no backend of the same pid modulo 16');
    await two.client.end();
    two = await connect(url);
  }
  return [one, two] as const;
}

let nextEvent = 100;
const insertEvent = (client: pg.Client, contact: string, name: string) =>
  client.query(`INSERT INTO events (id, project_id, contact_id, name) VALUES ($1, 'prj_a', $2, $3)`, [`evt_${nextEvent++}`, contact, name]);

/**
 * The bounce of cnt_a (its two events, in two statements of one transaction) while `doomed`, whose
 * events are counted under both names, is deleted. Returns the SQLSTATE each transaction ended with.
 */
async function bounceWhileDeleting(url: string, doomed: string): Promise<{ bounce: string; deletion: string }> {
  const [bounce, deletion] = await sameShardPair(url);
  const observer = new pg.Client({ connectionString: url });
  await observer.connect();
  try {
    await bounce.client.query('BEGIN');
    await insertEvent(bounce.client, 'cnt_a', 'email.bounced');
    await deletion.client.query('BEGIN');
    const deleting = deletion.client.query(`DELETE FROM contacts WHERE id = $1`, [doomed]).then(
      () => deletion.client.query('COMMIT').then(() => 'committed'),
      (err: { code: string }) => err.code,
    );
    // The delete either finishes or waits for a lock the bounce holds; only then does the bounce go on.
    // Before the server has read the DELETE, the backend is idle in its transaction and waits on the
    // client too, so "done" is a last statement past the BEGIN (the DELETE or its COMMIT), not running.
    // Read from a connection of its own: inside the bounce's transaction pg_stat_activity is one snapshot.
    let settled = false;
    for (let i = 0; i < 1000 && !settled; i++) {
      const { rows } = await observer.query<{ state: string; wait_event_type: string | null; query: string }>(
        `SELECT state, wait_event_type, query FROM pg_stat_activity WHERE pid = $1`,
        [deletion.pid],
      );
      const row = rows[0];
      settled = !row || row.wait_event_type === 'Lock' || (row.query !== 'BEGIN' && row.state !== 'active');
      if (!settled) await new Promise((r) => setTimeout(r, 10));
    }
    assert.ok(settled, 'the delete neither finished nor waited for a lock within 10 s');
    const bounced = await insertEvent(bounce.client, 'cnt_a', 'contact.unsubscribed').then(
      () => bounce.client.query('COMMIT').then(() => 'committed'),
      (err: { code: string }) => err.code,
    );
    const deleted = await deleting;
    for (const { client } of [bounce, deletion]) await client.query('ROLLBACK').catch(() => undefined);
    return { bounce: bounced, deletion: deleted };
  } finally {
    await bounce.client.end();
    await deletion.client.end();
    await observer.end();
  }
}

/** Each counter's sums against the events stored; rows where they differ. */
const differences = async (client: pg.Client) =>
  (
    await client.query(`
      SELECT 'event_counts' AS t, * FROM (
        SELECT coalesce(c.project_id, e.project_id) AS project_id, coalesce(c.name, e.name) AS name, NULL::date AS day, coalesce(c.n, 0)::int AS counted, coalesce(e.n, 0)::int AS stored
          FROM (SELECT project_id, name, sum(count) AS n FROM event_counts GROUP BY 1, 2) AS c
          FULL JOIN (SELECT project_id, name, count(*) AS n FROM events GROUP BY 1, 2) AS e USING (project_id, name)) AS x
       WHERE counted <> stored
      UNION ALL
      SELECT 'event_day_counts', * FROM (
        SELECT coalesce(c.project_id, e.project_id), coalesce(c.name, e.name), coalesce(c.day, e.day), coalesce(c.n, 0)::int AS counted, coalesce(e.n, 0)::int AS stored
          FROM (SELECT project_id, name, day, sum(count) AS n FROM event_day_counts GROUP BY 1, 2, 3) AS c
          FULL JOIN (SELECT project_id, name, (created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM events GROUP BY 1, 2, 3) AS e USING (project_id, name, day)) AS y
       WHERE counted <> stored`)
  ).rows;

test('the event counters keep their sums through the migration, and from it on two writers of one pid modulo 16 no longer deadlock', async () => {
  await acrossMigration('"event_counts", "event_day_counts" IN ACCESS EXCLUSIVE MODE', {
    until: EVENTS_WITHOUT_FOREIGN_KEYS,
    seed: async (client, url) => {
      await seedTwoProjects(client);
      await client.query(
        `INSERT INTO contacts (id, project_id, email, subscribed) VALUES ('cnt_y1', 'prj_a', 'y1@example.org', false), ('cnt_y2', 'prj_a', 'y2@example.org', false)`,
      );
      // Events written by several backends, so that the counters have several shards per key.
      for (const contact of ['cnt_y1', 'cnt_y2', 'cnt_a']) {
        const writer = await connect(url);
        await insertEvent(writer.client, contact, 'email.bounced');
        await insertEvent(writer.client, contact, 'contact.unsubscribed');
        await writer.client.end();
      }
      await client.query(
        `INSERT INTO events (id, project_id, contact_id, name, created_at) VALUES ('evt_1', 'prj_b', 'cnt_b', 'signup', '2025-02-01T10:00:00Z')`,
      );
      // The rollup of tracked events is written by the event writer itself (analytics/rollups.ts), here by hand.
      await client.query(
        `INSERT INTO event_name_days (project_id, name, day, shard, count) VALUES ('prj_b', 'signup', '2025-02-01', 3, 2), ('prj_b', 'signup', '2025-02-01', 7, 5), ('prj_b', 'signup', '2025-02-02', 0, 1)`,
      );

      const old = await bounceWhileDeleting(url, 'cnt_y1');
      assert.ok(old.bounce === '40P01' || old.deletion === '40P01', `the two transactions deadlock on shared shards: ${JSON.stringify(old)}`);
      assert.deepEqual(await differences(client), []);
      const shardsBefore = (await client.query(`SELECT count(DISTINCT shard)::int AS n FROM event_counts WHERE name = 'email.bounced'`)).rows[0].n;
      assert.ok(shardsBefore > 1, `several shards before: ${shardsBefore}`);
    },
    check: async (client, url) => {
      assert.deepEqual(await differences(client), []);
      for (const table of ['event_counts', 'event_day_counts', 'event_name_days']) {
        const { rows } = await client.query(
          `SELECT format_type(a.atttypid, a.atttypmod) AS type, (SELECT array_agg(DISTINCT shard) FROM ${table}) AS shards
           FROM pg_attribute AS a WHERE a.attrelid = $1::regclass AND a.attname = 'shard'`,
          [table],
        );
        assert.deepEqual(rows[0], { type: 'integer', shards: [0] }, table);
      }
      const rollup = await client.query(`SELECT day::text, shard, count FROM event_name_days ORDER BY day`);
      assert.deepEqual(rollup.rows, [
        { day: '2025-02-01', shard: 0, count: 7 },
        { day: '2025-02-02', shard: 0, count: 1 },
      ]);

      const now = await bounceWhileDeleting(url, 'cnt_y2');
      assert.deepEqual(now, { bounce: 'committed', deletion: 'committed' });
      assert.equal((await client.query(`SELECT count(*)::int AS n FROM contacts WHERE id = 'cnt_y2'`)).rows[0].n, 0);
      assert.deepEqual(await differences(client), []);
      // Each writer wrote rows of its own: shard 0 (folded by the migration) and one shard per pid since.
      const { rows } = await client.query(`SELECT DISTINCT shard FROM event_counts WHERE shard <> 0`);
      assert.equal(rows.length, 2, JSON.stringify(rows));
      assert.ok(rows.every((r) => r.shard > 0));
    },
  });
});
