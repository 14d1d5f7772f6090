import assert from 'node:assert/strict';
import { test } from 'node:test';
import { acrossMigration, seedTwoProjects } from './helpers/migrations.ts';

/**
 * A cancellation used to store 0 in every plan cap; it now stores none (the free plan's caps bind:
 * billing/limits.ts). The cancelled projects' rows are made the same; the others keep theirs.
 */
test("a cancelled subscription's 0 plan caps are cleared; a live or incomplete one keeps its plan's, and a project's own caps stay", async () => {
  await acrossMigration('WHERE "subscription_status" = \'canceled\'', {
    seed: async (client) => {
      await seedTwoProjects(client);
      await client.query(`INSERT INTO projects (id, name, public_key, webhook_secret) VALUES ('prj_c', 'C', 'pk_c', 'wh_c')`);
      await client.query(
        `INSERT INTO project_billing (project_id, limit_transactional, plan_limit_transactional, plan_limit_campaigns, plan_limit_workflows, plan_limit_inbound, plan, stripe_subscription_id, subscription_status) VALUES
         ('prj_a', 5, 0, 0, 0, 0, NULL, 'sub_a', 'canceled'),
         ('prj_b', NULL, 1000, NULL, 7, NULL, 'pro', 'sub_b', 'active'),
         ('prj_c', 3, 50, 60, NULL, NULL, 'pro', 'sub_c', 'incomplete')`,
      );
    },
    check: async (client) => {
      const { rows } = await client.query(
        `SELECT project_id, limit_transactional AS own_t, plan_limit_transactional AS t, plan_limit_campaigns AS c, plan_limit_workflows AS w, plan_limit_inbound AS i
           FROM project_billing ORDER BY project_id`,
      );
      assert.deepEqual(rows, [
        { project_id: 'prj_a', own_t: 5, t: null, c: null, w: null, i: null },
        { project_id: 'prj_b', own_t: null, t: 1000, c: null, w: 7, i: null },
        { project_id: 'prj_c', own_t: 3, t: 50, c: 60, w: null, i: null },
      ]);
    },
  });
});
