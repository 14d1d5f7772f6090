import assert from 'node:assert/strict';
import { test } from 'node:test';
import { acrossMigration, EVENTS_WITHOUT_FOREIGN_KEYS } from './helpers/migrations.ts';

/**
 * The migration that partitions events by month (issue 15) carries the events of an existing
 * install over: every row, each in its month's partition, with the same indexes and keys.
 */

test('events stored before partitioning keep every row, each in its month, and stay deletable with their contact', async () => {
  await acrossMigration('PARTITION BY RANGE ("created_at")', {
    until: EVENTS_WITHOUT_FOREIGN_KEYS,
    seed: async (client) => {
      await client.query(`INSERT INTO projects (id, name, public_key, webhook_secret) VALUES ('prj_m', 'M', 'pk_m', 'whsec')`);
      await client.query(
        `INSERT INTO contacts (id, project_id, email, subscribed) VALUES ('cnt_a', 'prj_m', 'a@example.org', true), ('cnt_b', 'prj_m', 'b@example.org', true)`,
      );
      await client.query(
        `INSERT INTO events (id, project_id, contact_id, name, data, created_at) VALUES
         ('evt_1', 'prj_m', 'cnt_a', 'signup', '{"plan": "pro"}', '2025-01-31T23:59:59.999Z'),
         ('evt_2', 'prj_m', 'cnt_a', 'login', NULL, '2025-02-01T00:00:00Z'),
         ('evt_3', 'prj_m', 'cnt_b', 'login', NULL, '2025-04-15T12:00:00Z'),
         ('evt_4', 'prj_m', NULL, 'email.clicked', '{"campaignId": "c1", "link": "https://x.test"}', now())`,
      );
    },
    check: async (client) => {
      const { rows } = await client.query(
        `SELECT id, contact_id, name, data, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS') AS at, tableoid::regclass::text AS part
         FROM events WHERE id <> 'evt_4' ORDER BY id`,
      );
      assert.deepEqual(rows, [
        { id: 'evt_1', contact_id: 'cnt_a', name: 'signup', data: { plan: 'pro' }, at: '2025-01-31T23:59:59.999', part: 'events_2025_01' },
        { id: 'evt_2', contact_id: 'cnt_a', name: 'login', data: null, at: '2025-02-01T00:00:00.000', part: 'events_2025_02' },
        { id: 'evt_3', contact_id: 'cnt_b', name: 'login', data: null, at: '2025-04-15T12:00:00.000', part: 'events_2025_04' },
      ]);
      const { rows: current } = await client.query(
        `SELECT tableoid::regclass::text AS part, to_char(now() AT TIME ZONE 'UTC', '"events_"YYYY_MM') AS month FROM events WHERE id = 'evt_4'`,
      );
      assert.equal(current[0].part, current[0].month);

      const { rows: indexes } = await client.query(`SELECT indexname FROM pg_indexes WHERE tablename = 'events' ORDER BY 1`);
      assert.deepEqual(
        indexes.map((r) => r.indexname),
        [
          'events_campaign_clicks_idx',
          'events_contact_created_idx',
          'events_contact_name_created_idx',
          'events_id_created_at_pk',
          'events_project_created_idx',
          'events_project_name_created_idx',
        ],
      );
      // The foreign keys came along: deleting a contact deletes its events in every month.
      await client.query(`DELETE FROM contacts WHERE id = 'cnt_a'`);
      const { rows: left } = await client.query(`SELECT id FROM events ORDER BY id`);
      assert.deepEqual(
        left.map((r) => r.id),
        ['evt_3', 'evt_4'],
      );
      const { rows: old } = await client.query(`SELECT to_regclass('events_unpartitioned') AS t`);
      assert.equal(old[0].t, null);
    },
  });
});
