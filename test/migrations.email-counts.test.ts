import assert from 'node:assert/strict';
import { test } from 'node:test';
import { acrossMigration, seedTwoProjects } from './helpers/migrations.ts';

/**
 * The migration that adds the per-status email counters behind GET /emails' `total` (issue 15)
 * counts the emails an existing install already has, and its triggers keep counting from there.
 */

/** Each project's and status's counter (summed over its shards) next to the emails actually stored. */
const COMPARE = `
  SELECT coalesce(c.project_id, e.project_id) AS project_id, coalesce(c.status, e.status) AS status,
         coalesce(c.n, 0)::int AS counted, coalesce(e.n, 0)::int AS stored
    FROM (SELECT project_id, status, sum(count) AS n FROM email_counts GROUP BY 1, 2) AS c
    FULL JOIN (SELECT project_id, status, count(*) AS n FROM emails GROUP BY 1, 2) AS e USING (project_id, status)
   WHERE coalesce(c.n, 0) <> 0 OR coalesce(e.n, 0) <> 0
   ORDER BY 1, 2`;

const email = (n: number, project: string, contact: string, status: string) =>
  `('00000000-0000-7000-8000-${String(n).padStart(12, '0')}', '${project}', '${contact}', 'x${n}@example.org', 'f@example.org', 'TRANSACTIONAL', 'S', '${status}', '${CONTENT[project]}')`;
const INSERT = `INSERT INTO emails (id, project_id, contact_id, to_email, from_email, type, subject_source, status, content_id) VALUES `;
const CONTENT: Record<string, string> = { prj_a: '00000000-0000-7000-8000-00000000000a', prj_b: '00000000-0000-7000-8000-00000000000b' };

test('emails stored before the counters existed are counted, and later writes keep the counts exact', async () => {
  await acrossMigration('CREATE TABLE "email_counts"', {
    seed: async (client) => {
      await seedTwoProjects(client);
      await client.query(`INSERT INTO email_contents (id, project_id, body_source) VALUES ($1, 'prj_a', 'b'), ($2, 'prj_b', 'b')`, [
        CONTENT.prj_a,
        CONTENT.prj_b,
      ]);
      await client.query(
        INSERT +
          [
            email(1, 'prj_a', 'cnt_a', 'SENT'),
            email(2, 'prj_a', 'cnt_a', 'SENT'),
            email(3, 'prj_a', 'cnt_a', 'QUEUED'),
            email(4, 'prj_b', 'cnt_b', 'BOUNCED'),
          ].join(', '),
      );
    },
    check: async (client) => {
      assert.deepEqual((await client.query(COMPARE)).rows, [
        { project_id: 'prj_a', status: 'QUEUED', counted: 1, stored: 1 },
        { project_id: 'prj_a', status: 'SENT', counted: 2, stored: 2 },
        { project_id: 'prj_b', status: 'BOUNCED', counted: 1, stored: 1 },
      ]);

      // From here on the triggers count: an insert, status changes (and an update that changes none),
      // a contact's delete (its emails stay), a delete, a project's cascade.
      await client.query(INSERT + [email(5, 'prj_a', 'cnt_a', 'QUEUED'), email(6, 'prj_a', 'cnt_a', 'QUEUED')].join(', '));
      await client.query(`UPDATE emails SET status = 'SENDING' WHERE status = 'QUEUED'`);
      await client.query(`UPDATE emails SET status = CASE WHEN id::text LIKE '%5' THEN 'COMPLAINED' ELSE 'SENT' END WHERE status = 'SENDING'`);
      const versions = `SELECT string_agg(xmin::text, ',' ORDER BY project_id, status, shard) AS v FROM email_counts`;
      const untouched = (await client.query(versions)).rows[0].v;
      await client.query(`UPDATE emails SET error = 'x' WHERE project_id = 'prj_a'`);
      assert.equal((await client.query(versions)).rows[0].v, untouched, 'an update that changes no status writes no counter');
      await client.query(`DELETE FROM contacts WHERE id = 'cnt_a'`);
      await client.query(`DELETE FROM emails WHERE id = '00000000-0000-7000-8000-000000000001'`);
      await client.query(`DELETE FROM projects WHERE id = 'prj_b'`);
      assert.deepEqual((await client.query(COMPARE)).rows, [
        { project_id: 'prj_a', status: 'COMPLAINED', counted: 1, stored: 1 },
        { project_id: 'prj_a', status: 'SENT', counted: 3, stored: 3 },
      ]);
      // Nothing is left of the deleted project's counters.
      assert.deepEqual((await client.query(`SELECT DISTINCT project_id FROM email_counts`)).rows, [{ project_id: 'prj_a' }]);
    },
  });
});
