import assert from 'node:assert/strict';
import { test } from 'node:test';
import { acrossMigration, assertWriterShard, seedTwoProjects } from './helpers/migrations.ts';

/**
 * The migration that adds the counters behind GET /contacts' `total` (issue 15) counts the
 * contacts an existing install already has, and its triggers keep counting from there.
 */

/** Each project's and subscription's counter (summed over its shards) next to the contacts stored. */
const COMPARE = `
  SELECT coalesce(c.project_id, r.project_id) AS project_id, coalesce(c.subscribed, r.subscribed) AS subscribed,
         coalesce(c.n, 0)::int AS counted, coalesce(r.n, 0)::int AS stored
    FROM (SELECT project_id, subscribed, sum(count) AS n FROM contact_counts GROUP BY 1, 2) AS c
    FULL JOIN (SELECT project_id, subscribed, count(*) AS n FROM contacts GROUP BY 1, 2) AS r USING (project_id, subscribed)
   ORDER BY 1, 2`;

const INSERT = `INSERT INTO contacts AS c (id, project_id, email, subscribed) VALUES `;

test('contacts stored before the counters existed are counted, and later writes keep the counts exact', async () => {
  await acrossMigration('CREATE TABLE "contact_counts"', {
    seed: async (client) => {
      await seedTwoProjects(client); // cnt_a (prj_a) and cnt_b (prj_b), both subscribed
      await client.query(INSERT + `('cnt_a2', 'prj_a', 'a2@example.org', false), ('cnt_a3', 'prj_a', 'a3@example.org', true)`);
    },
    check: async (client) => {
      assert.deepEqual((await client.query(COMPARE)).rows, [
        { project_id: 'prj_a', subscribed: false, counted: 1, stored: 1 },
        { project_id: 'prj_a', subscribed: true, counted: 2, stored: 2 },
        { project_id: 'prj_b', subscribed: true, counted: 1, stored: 1 },
      ]);

      const versions = `SELECT string_agg(xmin::text || ':' || shard, ',' ORDER BY project_id, subscribed, shard) AS v FROM contact_counts`;
      const untouched = (await client.query(versions)).rows[0].v;
      // Statements that write no contact, or change no subscription, write no counter.
      await client.query(INSERT + `('cnt_x', 'prj_a', 'a2@example.org', true) ON CONFLICT (project_id, email) DO NOTHING`);
      await client.query(`UPDATE contacts SET data = '{"plan": "pro"}' WHERE project_id = 'prj_a'`);
      await client.query(`UPDATE contacts SET subscribed = subscribed WHERE project_id = 'prj_a'`);
      await client.query(`DELETE FROM contacts WHERE id = 'cnt_none'`);
      assert.equal((await client.query(versions)).rows[0].v, untouched, 'no counter written');

      // From here on the triggers count: an upsert that inserts one row and updates another's
      // subscription, a subscription change, a delete, a project's cascade.
      await client.query(
        INSERT +
          `('cnt_a4', 'prj_a', 'a4@example.org', false), ('cnt_a2b', 'prj_a', 'a2@example.org', true)
         ON CONFLICT (project_id, email) DO UPDATE SET subscribed = excluded.subscribed`,
      );
      await client.query(`UPDATE contacts SET subscribed = false WHERE id = 'cnt_a3'`);
      await client.query(`DELETE FROM contacts WHERE id = 'cnt_a'`);
      await client.query(`DELETE FROM projects WHERE id = 'prj_b'`);
      const after = (await client.query(COMPARE)).rows.filter((r) => r.counted !== 0 || r.stored !== 0);
      assert.deepEqual(after, [
        { project_id: 'prj_a', subscribed: false, counted: 2, stored: 2 },
        { project_id: 'prj_a', subscribed: true, counted: 1, stored: 1 },
      ]);
      await assertWriterShard(client, 'contact_counts');
    },
  });
});
