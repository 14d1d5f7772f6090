import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { acrossMigration, seedTwoProjects } from './helpers/migrations.ts';

/**
 * The migration that adds the counters behind GET /workflows/:id and its executions' `total`
 * (issue 15) counts the executions and step executions an existing install already has, and its
 * triggers keep counting from there.
 */

const W1 = '00000000-0000-7000-8000-0000000000a1';
const W2 = '00000000-0000-7000-8000-0000000000a2';
const [S1, S2] = ['00000000-0000-7000-8000-0000000000b1', '00000000-0000-7000-8000-0000000000b2'];
const NONE = '00000000-0000-0000-0000-000000000000';
const execution = (n: number, workflow: string, contact: string, status: string, step: string | null) =>
  `('00000000-0000-7000-8000-${String(n).padStart(12, '0')}', '${contact === 'cnt_a' ? 'prj_a' : 'prj_b'}', '${workflow}', '${contact}', '${status}', ${step ? `'${step}'` : 'NULL'})`;
const EXECUTIONS = `INSERT INTO workflow_executions (id, project_id, workflow_id, contact_id, status, current_step_id) VALUES `;
const stepRun = (n: number, e: number, step: string, status: string, workflow = W1) =>
  `('00000000-0000-7000-8000-${String(1000 + n).padStart(12, '0')}', '00000000-0000-7000-8000-${String(e).padStart(12, '0')}', '${workflow}', '${step}', '${workflow === W1 ? 'prj_a' : 'prj_b'}', '${status}')`;
const STEP_RUNS = `INSERT INTO workflow_step_executions (id, execution_id, workflow_id, step_id, project_id, status) VALUES `;

const counted = async (client: pg.Client) => ({
  executions: (
    await client.query(
      `SELECT workflow_id, status, step_id, sum(count)::int AS n FROM workflow_execution_counts GROUP BY 1, 2, 3 HAVING sum(count) <> 0 ORDER BY 1, 2, 3`,
    )
  ).rows.map((r) => [r.workflow_id, r.status, r.step_id, r.n]),
  steps: (
    await client.query(
      `SELECT workflow_id, step_id, status, sum(count)::int AS n FROM workflow_step_counts GROUP BY 1, 2, 3 HAVING sum(count) <> 0 ORDER BY 1, 2, 3`,
    )
  ).rows.map((r) => [r.workflow_id, r.step_id, r.status, r.n]),
});

test('executions and step executions stored before the counters existed are counted, and later writes keep the counts exact', async () => {
  await acrossMigration('CREATE TABLE "workflow_execution_counts"', {
    seed: async (client) => {
      await seedTwoProjects(client);
      await client.query(`INSERT INTO contacts (id, project_id, email, subscribed) VALUES ('cnt_c', 'prj_a', 'c@example.org', true)`);
      await client.query(`INSERT INTO workflows (id, project_id, name, event_name) VALUES ($1, 'prj_a', 'one', 'signup'), ($2, 'prj_b', 'two', 'signup')`, [
        W1,
        W2,
      ]);
      await client.query(
        EXECUTIONS +
          [execution(1, W1, 'cnt_a', 'WAITING', S2), execution(2, W1, 'cnt_c', 'COMPLETED', null), execution(3, W2, 'cnt_b', 'RUNNING', S1)].join(', '),
      );
      await client.query(
        STEP_RUNS + [stepRun(1, 1, S1, 'COMPLETED'), stepRun(2, 1, S2, 'WAITING'), stepRun(3, 2, S1, 'COMPLETED'), stepRun(4, 3, S1, 'RUNNING', W2)].join(', '),
      );
    },
    check: async (client) => {
      assert.deepEqual(await counted(client), {
        executions: [
          [W1, 'COMPLETED', NONE, 1],
          [W1, 'WAITING', S2, 1],
          [W2, 'RUNNING', NONE, 1],
        ],
        steps: [
          [W1, S1, 'COMPLETED', 2],
          [W1, S2, 'WAITING', 1],
          [W2, S1, 'RUNNING', 1],
        ],
      });

      // From here on the triggers count: the waiting execution moves on and completes, a new one
      // waits at S1 with no step row, a contact's cascade, a workflow's cascade.
      await client.query(`UPDATE workflow_step_executions SET status = 'COMPLETED' WHERE status = 'WAITING'`);
      await client.query(`UPDATE workflow_executions SET status = 'RUNNING', current_step_id = $1 WHERE status = 'WAITING'`, [S1]);
      await client.query(`UPDATE workflow_executions SET status = 'EXITED', current_step_id = NULL WHERE workflow_id = $1 AND status = 'RUNNING'`, [W1]);
      await client.query(EXECUTIONS + execution(5, W1, 'cnt_c', 'WAITING', S1));
      await client.query(`DELETE FROM contacts WHERE id = 'cnt_a'`);
      await client.query(`DELETE FROM workflows WHERE id = $1`, [W2]);
      assert.deepEqual(await counted(client), {
        executions: [
          [W1, 'COMPLETED', NONE, 1],
          [W1, 'WAITING', S1, 1],
        ],
        steps: [[W1, S1, 'COMPLETED', 1]],
      });
      assert.deepEqual(
        (await client.query(`SELECT DISTINCT workflow_id FROM workflow_execution_counts UNION SELECT workflow_id FROM workflow_step_counts`)).rows,
        [{ workflow_id: W1 }],
      );
    },
  });
});
