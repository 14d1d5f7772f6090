import assert from 'node:assert/strict';
import { test } from 'node:test';
import { acrossMigration, seedTwoProjects } from './helpers/migrations.ts';

/**
 * The migration that keeps the plan's caps apart from a project's own (plan_limit_*): before it the
 * payments webhook wrote the plan's caps into limit_*, so a project with a Stripe subscription has
 * its plan's caps there (they move); a project without one set its caps itself (they stay).
 */
test("a subscribed project's caps become its plan's; an unsubscribed project keeps its own", async () => {
  // Up to migration 0035, which clears a cancelled subscription's 0s (migrations.cancelled-plan-caps).
  await acrossMigration('"plan_limit_transactional"', {
    until: 'WHERE "subscription_status" = \'canceled\'',
    seed: async (client) => {
      await seedTwoProjects(client);
      await client.query(`INSERT INTO projects (id, name, public_key, webhook_secret) VALUES ('prj_c', 'C', 'pk_c', 'wh_c')`);
      await client.query(
        `INSERT INTO project_billing (project_id, limit_transactional, limit_campaigns, limit_workflows, limit_inbound, plan, stripe_customer_id, stripe_subscription_id, subscription_status) VALUES
         ('prj_a', 1000, NULL, 0, 5, 'pro', 'cus_a', 'sub_a', 'active'),
         ('prj_b', 0, 0, 0, 0, NULL, 'cus_b', 'sub_b', 'canceled'),
         ('prj_c', 50, NULL, 7, NULL, NULL, 'cus_c', NULL, NULL)`,
      );
    },
    check: async (client) => {
      const { rows } = await client.query(
        `SELECT project_id, limit_transactional AS own_t, limit_campaigns AS own_c, limit_workflows AS own_w, limit_inbound AS own_i,
              plan_limit_transactional AS plan_t, plan_limit_campaigns AS plan_c, plan_limit_workflows AS plan_w, plan_limit_inbound AS plan_i
         FROM project_billing ORDER BY project_id`,
      );
      assert.deepEqual(rows, [
        { project_id: 'prj_a', own_t: null, own_c: null, own_w: null, own_i: null, plan_t: 1000, plan_c: null, plan_w: 0, plan_i: 5 },
        { project_id: 'prj_b', own_t: null, own_c: null, own_w: null, own_i: null, plan_t: 0, plan_c: 0, plan_w: 0, plan_i: 0 },
        { project_id: 'prj_c', own_t: 50, own_c: null, own_w: 7, own_i: null, plan_t: null, plan_c: null, plan_w: null, plan_i: null },
      ]);
    },
  });
});
