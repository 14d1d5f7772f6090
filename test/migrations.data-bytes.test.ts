import assert from 'node:assert/strict';
import { test } from 'node:test';
import { acrossMigration, seedTwoProjects } from './helpers/migrations.ts';

/**
 * The migrations that size list pages without printing them (db/page-budget.ts): contacts stored
 * before `data_bytes` get it when their data is large (small ones are measured in the query), every
 * stored segment gets its `condition_bytes`, and from then on the trigger keeps `data_bytes`.
 */

test('stored contacts of large data and stored segments are sized; small contacts are left to the query', async () => {
  await acrossMigration('"data_bytes"', {
    seed: async (client) => {
      await seedTwoProjects(client);
      const big = JSON.stringify({ blob: 'x'.repeat(300_000).replace(/x/g, (_, i: number) => String.fromCharCode(97 + ((i * 7919) % 26))) });
      await client.query(`UPDATE contacts SET data = $1::jsonb WHERE id = 'cnt_a'`, [big]);
      await client.query(`UPDATE contacts SET data = '{"plan": "pro"}'::jsonb WHERE id = 'cnt_b'`);
      await client.query(
        `INSERT INTO segments (id, project_id, name, type, condition) VALUES
         ('00000000-0000-7000-8000-000000000001', 'prj_a', 'pros', 'DYNAMIC', '{"logic": "AND", "groups": [{"filters": [{"field": "data.plan", "operator": "equals", "value": "pro"}]}]}'),
         ('00000000-0000-7000-8000-000000000002', 'prj_a', 'list', 'STATIC', NULL)`,
      );
    },
    check: async (client) => {
      const contacts = await client.query<{ id: string; data_bytes: number | null; printed: number }>(
        `SELECT id, data_bytes, octet_length(data::text) AS printed FROM contacts ORDER BY id`,
      );
      assert.deepEqual(
        contacts.rows.map((r) => [r.id, r.data_bytes]),
        [
          ['cnt_a', contacts.rows[0].printed],
          ['cnt_b', null],
        ],
      );
      assert.ok(contacts.rows[0].printed > 300_000);
      const segments = await client.query<{ name: string; condition_bytes: number | null; printed: number | null }>(
        `SELECT name, condition_bytes, octet_length(condition::text) AS printed FROM segments ORDER BY name`,
      );
      assert.deepEqual(
        segments.rows.map((r) => [r.name, r.condition_bytes]),
        [
          ['list', null],
          ['pros', segments.rows[1].printed],
        ],
      );

      // From here the trigger sizes every write of data, and only of data.
      await client.query(`UPDATE contacts SET data = data || '{"visits": 3}'::jsonb WHERE id = 'cnt_b'`);
      await client.query(`UPDATE contacts SET subscribed = false WHERE id = 'cnt_a'`);
      await client.query(`INSERT INTO contacts (id, project_id, email, subscribed, data) VALUES ('cnt_c', 'prj_a', 'c@example.org', true, '{"n": 1}')`);
      const after = await client.query<{ id: string; ok: boolean }>(`SELECT id, data_bytes = octet_length(data::text) AS ok FROM contacts ORDER BY id`);
      assert.deepEqual(
        after.rows.map((r) => [r.id, r.ok]),
        [
          ['cnt_a', true],
          ['cnt_b', true],
          ['cnt_c', true],
        ],
      );
    },
  });
});
