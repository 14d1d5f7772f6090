import assert from 'node:assert/strict';
import { test } from 'node:test';
import { acrossMigration, EVENTS_WITHOUT_FOREIGN_KEYS, seedTwoProjects } from './helpers/migrations.ts';

/**
 * The migration that adds the per-day event counters behind counts over a time range (issue 15)
 * counts the events an existing install already has, by UTC day, and the triggers keep both the
 * per-name and the per-day counters from there.
 */

/** Each project's, name's and UTC day's counter (summed over its shards) next to the events actually stored. */
const COMPARE = `
  SELECT coalesce(c.project_id, e.project_id) AS project_id, coalesce(c.name, e.name) AS name, to_char(coalesce(c.day, e.day), 'YYYY-MM-DD') AS day,
         coalesce(c.n, 0)::int AS counted, coalesce(e.n, 0)::int AS stored
    FROM (SELECT project_id, name, day, sum(count) AS n FROM event_day_counts GROUP BY 1, 2, 3) AS c
    FULL JOIN (SELECT project_id, name, (created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM events GROUP BY 1, 2, 3) AS e
      USING (project_id, name, day)
   ORDER BY 1, 2, 3`;

const TOTALS = `SELECT project_id, name, sum(count)::int AS n FROM event_counts GROUP BY 1, 2 HAVING sum(count) <> 0 ORDER BY 1, 2`;

test('events stored before the day counters existed are counted by UTC day, and later writes keep both counters exact', async () => {
  await acrossMigration('CREATE TABLE "event_day_counts"', {
    until: EVENTS_WITHOUT_FOREIGN_KEYS,
    seed: async (client) => {
      await seedTwoProjects(client);
      // 23:30 at -05:00 is the next UTC day.
      await client.query(
        `INSERT INTO events (id, project_id, contact_id, name, created_at) VALUES
         ('evt_1', 'prj_a', 'cnt_a', 'signup', '2025-01-31T23:59:59.999999Z'),
         ('evt_2', 'prj_a', 'cnt_a', 'signup', '2025-02-01T00:00:00Z'),
         ('evt_3', 'prj_a', NULL, 'signup', '2025-01-31T23:30:00-05:00'),
         ('evt_4', 'prj_a', NULL, 'email.sent', '2025-02-01T10:00:00Z'),
         ('evt_5', 'prj_b', 'cnt_b', 'signup', '2025-02-01T10:00:00Z')`,
      );
    },
    check: async (client) => {
      assert.deepEqual((await client.query(COMPARE)).rows, [
        { project_id: 'prj_a', name: 'email.sent', day: '2025-02-01', counted: 1, stored: 1 },
        { project_id: 'prj_a', name: 'signup', day: '2025-01-31', counted: 1, stored: 1 },
        { project_id: 'prj_a', name: 'signup', day: '2025-02-01', counted: 2, stored: 2 },
        { project_id: 'prj_b', name: 'signup', day: '2025-02-01', counted: 1, stored: 1 },
      ]);

      // From here on the triggers count: an insert, a contact's cascade, a delete by name, a project's cascade.
      await client.query(
        `INSERT INTO events (id, project_id, contact_id, name, created_at) VALUES ('evt_6', 'prj_a', NULL, 'login', '2025-02-02T08:00:00Z'), ('evt_7', 'prj_a', NULL, 'login', '2025-02-02T09:00:00Z')`,
      );
      await client.query(`DELETE FROM contacts WHERE id = 'cnt_a'`);
      await client.query(`DELETE FROM events WHERE project_id = 'prj_a' AND name = 'email.sent'`);
      await client.query(`DELETE FROM projects WHERE id = 'prj_b'`);
      const after = (await client.query(COMPARE)).rows.filter((r) => r.counted !== 0 || r.stored !== 0);
      assert.deepEqual(after, [
        { project_id: 'prj_a', name: 'login', day: '2025-02-02', counted: 2, stored: 2 },
        { project_id: 'prj_a', name: 'signup', day: '2025-02-01', counted: 1, stored: 1 },
      ]);
      assert.deepEqual((await client.query(TOTALS)).rows, [
        { project_id: 'prj_a', name: 'login', n: 2 },
        { project_id: 'prj_a', name: 'signup', n: 1 },
      ]);
    },
  });
});
