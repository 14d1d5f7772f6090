import assert from 'node:assert/strict';
import { test } from 'node:test';
import { acrossMigration, seedTwoProjects } from './helpers/migrations.ts';

/**
 * The migration that gives the public key's Idempotency-Keys a space of their own keeps the keys an
 * install holds, each in the space of the request that claimed it, and lets one key be held in both.
 */
test("held keys stay held, a /v1/track's in the public key's space, and one key may then be held by each", async () => {
  await acrossMigration('ADD COLUMN "key_type"', {
    seed: async (client) => {
      await seedTwoProjects(client);
      await client.query(
        `INSERT INTO idempotency_keys (project_id, key, method, path, status_code, expires_at) VALUES
         ('prj_a', 'order-1', 'POST', '/v1/send', 200, now() + interval '1 day'),
         ('prj_a', 'visit-1', 'POST', '/v1/track', 200, now() + interval '1 day'),
         ('prj_b', 'order-1', 'POST', '/v1/track', NULL, now() + interval '1 day')`,
      );
    },
    check: async (client) => {
      const held = `SELECT project_id, key_type, key, path FROM idempotency_keys ORDER BY project_id, key_type, key`;
      assert.deepEqual((await client.query(held)).rows, [
        { project_id: 'prj_a', key_type: 'public', key: 'visit-1', path: '/v1/track' },
        { project_id: 'prj_a', key_type: 'secret', key: 'order-1', path: '/v1/send' },
        { project_id: 'prj_b', key_type: 'public', key: 'order-1', path: '/v1/track' },
      ]);
      await client.query(
        `INSERT INTO idempotency_keys (project_id, key_type, key, method, path, expires_at) VALUES ('prj_a', 'public', 'order-1', 'POST', '/v1/track', now())`,
      );
      await assert.rejects(
        client.query(
          `INSERT INTO idempotency_keys (project_id, key_type, key, method, path, expires_at) VALUES ('prj_a', 'secret', 'order-1', 'POST', '/v1/send', now())`,
        ),
        /idempotency_keys_project_id_key_type_key_pk/,
      );
    },
  });
});
