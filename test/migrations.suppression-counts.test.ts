import assert from 'node:assert/strict';
import { test } from 'node:test';
import { acrossMigration, assertWriterShard, seedTwoProjects } from './helpers/migrations.ts';

/**
 * The migration that adds the counters behind GET /suppressions' `total` counts the suppressions
 * an existing install already has, and its triggers keep counting from there.
 */

/** Each project's and reason's counter (summed over its shards) next to the suppressions stored. */
const COMPARE = `
  SELECT coalesce(c.project_id, r.project_id) AS project_id, coalesce(c.reason, r.reason) AS reason,
         coalesce(c.n, 0)::int AS counted, coalesce(r.n, 0)::int AS stored
    FROM (SELECT project_id, reason, sum(count) AS n FROM suppression_counts GROUP BY 1, 2) AS c
    FULL JOIN (SELECT project_id, reason, count(*) AS n FROM suppressions GROUP BY 1, 2) AS r USING (project_id, reason)
   ORDER BY 1, 2`;

const INSERT = `INSERT INTO suppressions (project_id, email, reason) VALUES `;

test('suppressions stored before the counters existed are counted, and later writes keep the counts exact', async () => {
  await acrossMigration('CREATE TABLE "suppression_counts"', {
    seed: async (client) => {
      await seedTwoProjects(client);
      await client.query(
        INSERT +
          `('prj_a', 'a1@example.org', 'bounce'), ('prj_a', 'a2@example.org', 'bounce'), ('prj_a', 'a3@example.org', 'complaint'), ('prj_b', 'b1@example.org', 'manual')`,
      );
    },
    check: async (client) => {
      assert.deepEqual((await client.query(COMPARE)).rows, [
        { project_id: 'prj_a', reason: 'bounce', counted: 2, stored: 2 },
        { project_id: 'prj_a', reason: 'complaint', counted: 1, stored: 1 },
        { project_id: 'prj_b', reason: 'manual', counted: 1, stored: 1 },
      ]);

      const versions = `SELECT string_agg(xmin::text || ':' || shard, ',' ORDER BY project_id, reason, shard) AS v FROM suppression_counts`;
      const untouched = (await client.query(versions)).rows[0].v;
      // Statements that write no suppression (the first reason is kept) write no counter.
      await client.query(INSERT + `('prj_a', 'a1@example.org', 'complaint') ON CONFLICT DO NOTHING`);
      await client.query(`DELETE FROM suppressions WHERE email = 'nobody@example.org'`);
      await client.query(`UPDATE suppressions SET created_at = created_at WHERE project_id = 'prj_a'`);
      assert.equal((await client.query(versions)).rows[0].v, untouched, 'no counter written');

      // From here on the triggers count: new addresses, a delete, an operator's change of reason, a project's cascade.
      await client.query(INSERT + `('prj_a', 'a4@example.org', 'manual'), ('prj_a', 'a5@example.org', 'bounce'), ('prj_b', 'b2@example.org', 'bounce')`);
      await client.query(`DELETE FROM suppressions WHERE project_id = 'prj_a' AND email = 'a1@example.org'`);
      await client.query(`UPDATE suppressions SET reason = 'complaint' WHERE project_id = 'prj_a' AND email = 'a2@example.org'`);
      await client.query(`DELETE FROM projects WHERE id = 'prj_b'`);
      const after = (await client.query(COMPARE)).rows.filter((r) => r.counted !== 0 || r.stored !== 0);
      assert.deepEqual(after, [
        { project_id: 'prj_a', reason: 'bounce', counted: 1, stored: 1 },
        { project_id: 'prj_a', reason: 'complaint', counted: 2, stored: 2 },
        { project_id: 'prj_a', reason: 'manual', counted: 1, stored: 1 },
      ]);
      await assertWriterShard(client, 'suppression_counts');
    },
  });
});
