import assert from 'node:assert/strict';
import { test } from 'node:test';
import { acrossMigration, EVENTS_WITHOUT_FOREIGN_KEYS, seedTwoProjects } from './helpers/migrations.ts';

/**
 * The migration that adds the per-name event counters behind GET /events' `total` (issue 15)
 * counts the events an existing install already has, and its triggers keep counting from there.
 */

/** Each project's and name's counter (summed over its shards) next to the events actually stored. */
const COMPARE = `
  SELECT coalesce(c.project_id, e.project_id) AS project_id, coalesce(c.name, e.name) AS name,
         coalesce(c.n, 0)::int AS counted, coalesce(e.n, 0)::int AS stored
    FROM (SELECT project_id, name, sum(count) AS n FROM event_counts GROUP BY 1, 2) AS c
    FULL JOIN (SELECT project_id, name, count(*) AS n FROM events GROUP BY 1, 2) AS e USING (project_id, name)
   ORDER BY 1, 2`;

test('events stored before the counters existed are counted, and later writes keep the counts exact', async () => {
  await acrossMigration('CREATE TABLE "event_counts"', {
    until: EVENTS_WITHOUT_FOREIGN_KEYS,
    seed: async (client) => {
      await seedTwoProjects(client);
      await client.query(
        `INSERT INTO events (id, project_id, contact_id, name, created_at) VALUES
         ('evt_1', 'prj_a', 'cnt_a', 'signup', '2025-01-31T23:59:59Z'),
         ('evt_2', 'prj_a', 'cnt_a', 'login', '2025-02-01T00:00:00Z'),
         ('evt_3', 'prj_a', NULL, 'login', now()),
         ('evt_4', 'prj_a', NULL, 'email.sent', now()),
         ('evt_5', 'prj_b', 'cnt_b', 'login', now())`,
      );
    },
    check: async (client) => {
      const counted = (await client.query(COMPARE)).rows;
      assert.deepEqual(counted, [
        { project_id: 'prj_a', name: 'email.sent', counted: 1, stored: 1 },
        { project_id: 'prj_a', name: 'login', counted: 2, stored: 2 },
        { project_id: 'prj_a', name: 'signup', counted: 1, stored: 1 },
        { project_id: 'prj_b', name: 'login', counted: 1, stored: 1 },
      ]);

      // From here on the triggers count: an insert, a contact's cascade, a delete by name, a project's cascade.
      await client.query(`INSERT INTO events (id, project_id, contact_id, name) VALUES ('evt_6', 'prj_a', NULL, 'signup'), ('evt_7', 'prj_a', NULL, 'signup')`);
      await client.query(`DELETE FROM contacts WHERE id = 'cnt_a'`);
      await client.query(`DELETE FROM events WHERE project_id = 'prj_a' AND name = 'email.sent'`);
      await client.query(`DELETE FROM projects WHERE id = 'prj_b'`);
      const after = (await client.query(COMPARE)).rows.filter((r) => r.counted !== 0 || r.stored !== 0);
      assert.deepEqual(after, [
        { project_id: 'prj_a', name: 'login', counted: 1, stored: 1 },
        { project_id: 'prj_a', name: 'signup', counted: 2, stored: 2 },
      ]);
    },
  });
});
