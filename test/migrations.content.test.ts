import assert from 'node:assert/strict';
import { test } from 'node:test';
import { acrossMigration } from './helpers/migrations.ts';

/**
 * The migration that moved the shared content of emails into email_contents (issue 14 finding 5)
 * carries emails written before it over: each keeps its body, variables, headers and attachments.
 */

test('emails stored before the content table keep their content after the migration', async () => {
  const attachments = [{ filename: 'a.txt', content: 'aGk=', contentType: 'text/plain' }];
  await acrossMigration('CREATE TABLE "email_contents"', {
    seed: async (client) => {
      await client.query(`INSERT INTO projects (id, name, public_key, webhook_secret) VALUES ('prj_m', 'M', 'pk_m', 'whsec')`);
      await client.query(
        `INSERT INTO emails (id, project_id, to_email, from_email, type, subject_source, body_source, variables, headers, attachments, status)
       VALUES ('01900000-0000-7000-8000-000000000001', 'prj_m', 'a@example.org', 'f@example.org', 'TRANSACTIONAL', 'S {{x}}', '<p>{{x}}</p>',
               '{"x": 1}', '{"X-Tag": "t"}', $1, 'QUEUED'),
              ('01900000-0000-7000-8000-000000000002', 'prj_m', 'b@example.org', 'f@example.org', 'MARKETING', 'S2', '<p>two</p>',
               '{}', '{}', NULL, 'SENT')`,
        [JSON.stringify(attachments)],
      );
    },
    check: async (client) => {
      const { rows } = await client.query(
        `SELECT e.id, e.subject_source, e.content_id, c.project_id, c.body_source, c.variables, c.headers, c.attachments
         FROM emails e JOIN email_contents c ON c.id = e.content_id ORDER BY e.id`,
      );
      assert.deepEqual(rows, [
        {
          id: '01900000-0000-7000-8000-000000000001',
          subject_source: 'S {{x}}',
          content_id: '01900000-0000-7000-8000-000000000001',
          project_id: 'prj_m',
          body_source: '<p>{{x}}</p>',
          variables: { x: 1 },
          headers: { 'X-Tag': 't' },
          attachments,
        },
        {
          id: '01900000-0000-7000-8000-000000000002',
          subject_source: 'S2',
          content_id: '01900000-0000-7000-8000-000000000002',
          project_id: 'prj_m',
          body_source: '<p>two</p>',
          variables: {},
          headers: {},
          attachments: null,
        },
      ]);
      const { rows: columns } = await client.query(
        `SELECT column_name FROM information_schema.columns WHERE table_name = 'emails' AND column_name IN ('body_source', 'variables', 'headers', 'attachments', 'content_id')`,
      );
      assert.deepEqual(
        columns.map((c) => c.column_name),
        ['content_id'],
      );
    },
  });
});
