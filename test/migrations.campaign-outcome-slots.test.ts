import assert from 'node:assert/strict';
import { test } from 'node:test';
import { acrossMigration, seedTwoProjects } from './helpers/migrations.ts';

/**
 * Migration 0028 adds each campaign's outcomes per quarter hour (a campaign's series reads them)
 * and fills them from the campaign emails an install already has: each outcome in the quarter hour
 * of its time, a message refused at once counted as sent at its bounce, emails of no campaign left out.
 */

const CAMPAIGN = { prj_a: '00000000-0000-7000-8000-0000000000c1', prj_b: '00000000-0000-7000-8000-0000000000c2' };
const CONTENT = { prj_a: '00000000-0000-7000-8000-00000000000a', prj_b: '00000000-0000-7000-8000-00000000000b' };

const email = (n: number, project: 'prj_a' | 'prj_b', campaign: boolean, times: { sent?: string; opened?: string; clicked?: string; bounced?: string }) =>
  `('00000000-0000-7000-8000-${String(n).padStart(12, '0')}', '${project}', ${campaign ? `'${CAMPAIGN[project]}'` : 'NULL'}, 'x${n}@example.org',
    'f@example.org', 'MARKETING', 'S', '${times.bounced ? 'BOUNCED' : 'SENT'}', '${CONTENT[project]}',
    ${[times.sent, times.opened, times.clicked, times.bounced].map((t) => (t ? `'${t}'::timestamptz` : 'NULL')).join(', ')})`;

test('campaign emails stored before the slots existed are counted in the quarter hour of each outcome', async () => {
  await acrossMigration('CREATE TABLE "campaign_outcome_slots"', {
    seed: async (client) => {
      await seedTwoProjects(client);
      for (const p of ['prj_a', 'prj_b'] as const) {
        await client.query(`INSERT INTO email_contents (id, project_id, body_source) VALUES ($1, $2, 'b')`, [CONTENT[p], p]);
        await client.query(
          `INSERT INTO campaigns (id, project_id, name, subject, body, from_email, status) VALUES ($1, $2, 'C', 'S', 'B', 'f@example.org', 'SENT')`,
          [CAMPAIGN[p], p],
        );
      }
      await client.query(
        `INSERT INTO emails (id, project_id, campaign_id, to_email, from_email, type, subject_source, status, content_id, sent_at, opened_at, clicked_at, bounced_at) VALUES ` +
          [
            email(1, 'prj_a', true, { sent: '2026-03-01T10:14:59Z', opened: '2026-03-01T10:15:00Z', clicked: '2026-03-02T08:00:00Z' }),
            email(2, 'prj_a', true, { sent: '2026-03-01T10:00:00Z', opened: '2026-03-01T10:29:59.999Z' }),
            email(3, 'prj_a', true, { bounced: '2026-03-01T10:01:00Z' }), // refused at once: never sent_at
            email(4, 'prj_a', false, { sent: '2026-03-01T10:02:00Z', opened: '2026-03-01T10:20:00Z' }), // transactional
            email(5, 'prj_b', true, { sent: '2026-03-01T23:59:00Z' }),
          ].join(', '),
      );
    },
    check: async (client) => {
      const { rows } = await client.query(
        `SELECT project_id, campaign_id, to_char(slot AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') AS slot, sent, opened, clicked, bounced
         FROM campaign_outcome_slots ORDER BY project_id, slot`,
      );
      const a = { project_id: 'prj_a', campaign_id: CAMPAIGN.prj_a };
      assert.deepEqual(rows, [
        { ...a, slot: '2026-03-01 10:00', sent: 3, opened: 0, clicked: 0, bounced: 1 },
        { ...a, slot: '2026-03-01 10:15', sent: 0, opened: 2, clicked: 0, bounced: 0 },
        { ...a, slot: '2026-03-02 08:00', sent: 0, opened: 0, clicked: 1, bounced: 0 },
        { project_id: 'prj_b', campaign_id: CAMPAIGN.prj_b, slot: '2026-03-01 23:45', sent: 1, opened: 0, clicked: 0, bounced: 0 },
      ]);
      // A project's delete takes its slots.
      await client.query(`DELETE FROM projects WHERE id = 'prj_b'`);
      assert.equal((await client.query(`SELECT count(*)::int AS n FROM campaign_outcome_slots WHERE project_id = 'prj_b'`)).rows[0].n, 0);
    },
  });
});
