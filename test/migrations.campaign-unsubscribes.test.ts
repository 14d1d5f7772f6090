import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { acrossMigration, seedTwoProjects } from './helpers/migrations.ts';

/**
 * Migration 0030 adds each campaign's recipients who unsubscribed after its email
 * (campaign_unsubscribes) and fills it from the events an install already has, by the rule the
 * stats counted with until then: an unsubscribe at or after the email was sent, once per recipient,
 * for the named email's campaign only when it names one, and none caused by a bounce or complaint.
 * From then on the trigger on `events` writes it.
 */

const CAMPAIGN = { first: '00000000-0000-7000-8000-0000000000c1', second: '00000000-0000-7000-8000-0000000000c2' };
const CONTENT = '00000000-0000-7000-8000-00000000000a';
const emailId = (n: number) => `00000000-0000-7000-8000-${String(n).padStart(12, '0')}`;

const email = (n: number, contact: string, campaign: string | null, sentAt: string | null) =>
  `('${emailId(n)}', 'prj_a', '${contact}', ${campaign ? `'${campaign}'` : 'NULL'}, '${contact}@example.org', 'f@example.org', 'MARKETING', 'S',
    '${sentAt ? 'SENT' : 'QUEUED'}', '${CONTENT}', ${sentAt ? `'${sentAt}'::timestamptz` : 'NULL'})`;

let events = 0;
const unsubscribed = (contact: string, at: string, data: Record<string, string> | null = null) =>
  `('evt_${++events}', 'prj_a', '${contact}', 'contact.unsubscribed', ${data ? `'${JSON.stringify(data)}'::jsonb` : 'NULL'}, '${at}'::timestamptz)`;

const rowsOf = async (client: pg.Client) =>
  (
    await client.query(
      `SELECT campaign_id, contact_id, to_char(unsubscribed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') AS at
         FROM campaign_unsubscribes ORDER BY campaign_id, contact_id`,
    )
  ).rows;

test('unsubscribes stored before the table existed are counted per campaign; later ones by the trigger, by the same rule', async () => {
  await acrossMigration('CREATE TABLE "campaign_unsubscribes"', {
    seed: async (client) => {
      await seedTwoProjects(client);
      await client.query(`INSERT INTO email_contents (id, project_id, body_source) VALUES ($1, 'prj_a', 'b')`, [CONTENT]);
      for (const id of Object.values(CAMPAIGN)) {
        await client.query(
          `INSERT INTO campaigns (id, project_id, name, subject, body, from_email, status) VALUES ($1, 'prj_a', 'C', 'S', 'B', 'f@example.org', 'SENT')`,
          [id],
        );
      }
      await client.query(
        `INSERT INTO emails (id, project_id, contact_id, campaign_id, to_email, from_email, type, subject_source, status, content_id, sent_at) VALUES ` +
          [
            email(1, 'cnt_a', CAMPAIGN.first, '2026-03-01T10:00:00Z'),
            email(2, 'cnt_a', CAMPAIGN.second, '2026-03-05T10:00:00Z'),
            email(3, 'cnt_b', CAMPAIGN.first, '2026-03-01T10:00:00Z'),
            email(4, 'cnt_b', CAMPAIGN.second, '2026-03-05T10:00:00Z'),
            email(5, 'cnt_c', CAMPAIGN.first, '2026-03-01T10:00:00Z'),
            email(6, 'cnt_d', CAMPAIGN.first, '2026-03-01T10:00:00Z'),
            email(7, 'cnt_e', CAMPAIGN.first, null), // never sent
            email(8, 'cnt_f', null, '2026-03-01T10:00:00Z'), // transactional
          ].join(', '),
      );
      await client.query(
        `INSERT INTO events (id, project_id, contact_id, name, data, created_at) VALUES ` +
          [
            unsubscribed('cnt_a', '2026-03-02T09:00:00Z'), // after the first campaign, before the second
            unsubscribed('cnt_a', '2026-03-06T09:00:00Z'), // resubscribed in between: now after both
            unsubscribed('cnt_a', '2026-03-07T09:00:00Z'), // again: each campaign keeps its first
            unsubscribed('cnt_b', '2026-03-06T09:00:00Z', { source: 'unsubscribe_link', emailId: emailId(4) }), // the second's link only
            unsubscribed('cnt_c', '2026-03-02T09:00:00Z', { reason: 'complaint' }),
            unsubscribed('cnt_d', '2026-02-28T09:00:00Z'), // before its email
            unsubscribed('cnt_e', '2026-03-02T09:00:00Z'),
            unsubscribed('cnt_f', '2026-03-02T09:00:00Z'),
          ].join(', '),
      );
    },
    check: async (client) => {
      assert.deepEqual(await rowsOf(client), [
        { campaign_id: CAMPAIGN.first, contact_id: 'cnt_a', at: '2026-03-02 09:00' },
        { campaign_id: CAMPAIGN.second, contact_id: 'cnt_a', at: '2026-03-06 09:00' },
        { campaign_id: CAMPAIGN.second, contact_id: 'cnt_b', at: '2026-03-06 09:00' },
      ]);

      // The trigger, for one statement of several events: the link's email only, a complaint's none,
      // a contact already counted not again, an email not yet sent at the unsubscribe's time not.
      await client.query(
        `INSERT INTO events (id, project_id, contact_id, name, data, created_at) VALUES ` +
          [
            unsubscribed('cnt_c', '2026-03-08T09:00:00Z', { source: 'unsubscribe_link', emailId: emailId(5) }),
            unsubscribed('cnt_d', '2026-03-08T09:00:00Z', { reason: 'bounce' }),
            unsubscribed('cnt_b', '2026-03-08T09:00:00Z'),
            unsubscribed('cnt_a', '2026-03-08T09:00:00Z'),
            unsubscribed('cnt_e', '2026-03-08T09:00:00Z'),
            `('evt_signed_in', 'prj_a', 'cnt_d', 'signed_in', NULL, '2026-03-08T09:00:00Z'::timestamptz)`,
          ].join(', '),
      );
      assert.deepEqual(await rowsOf(client), [
        { campaign_id: CAMPAIGN.first, contact_id: 'cnt_a', at: '2026-03-02 09:00' },
        { campaign_id: CAMPAIGN.first, contact_id: 'cnt_b', at: '2026-03-08 09:00' },
        { campaign_id: CAMPAIGN.first, contact_id: 'cnt_c', at: '2026-03-08 09:00' },
        { campaign_id: CAMPAIGN.second, contact_id: 'cnt_a', at: '2026-03-06 09:00' },
        { campaign_id: CAMPAIGN.second, contact_id: 'cnt_b', at: '2026-03-06 09:00' },
      ]);

      // An unsubscribe reads its contact's emails, not the project's: 20,000 more sent emails, not yet
      // analyzed, tempted the planner to AND the contact index with (project_id, sent_at), a read of
      // every sent email per unsubscribe. The trigger's plan, as auto_explain prints it.
      await client.query(
        `INSERT INTO emails (id, project_id, contact_id, campaign_id, to_email, from_email, type, subject_source, status, content_id, sent_at)
       SELECT gen_random_uuid(), 'prj_a', 'cnt_many' || g, $1, 'm' || g || '@example.org', 'f@example.org', 'MARKETING', 'S', 'SENT', $2, '2026-03-01T10:00:00Z'
         FROM generate_series(1, 20000) AS g`,
        [CAMPAIGN.first, CONTENT],
      );
      const plans: string[] = [];
      client.on('notice', (n) => plans.push(String(n.message)));
      await client.query(`LOAD 'auto_explain'`);
      await client.query(`SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on; SET auto_explain.log_level = notice`);
      await client.query(`INSERT INTO events (id, project_id, contact_id, name, data, created_at) VALUES ${unsubscribed('cnt_many7', '2026-03-08T09:00:00Z')}`);
      await client.query(`SET auto_explain.log_min_duration = -1`);
      const plan = plans.find((p) => p.includes('INSERT INTO campaign_unsubscribes'));
      assert.ok(plan, plans.join('\n'));
      assert.match(plan, /Index Cond: \(contact_id = u\.contact_id\)/);
      assert.doesNotMatch(plan, /emails_project_sent_at_idx|Seq Scan on emails/, plan);
      assert.equal((await client.query(`SELECT count(*)::int AS n FROM campaign_unsubscribes WHERE contact_id = 'cnt_many7'`)).rows[0].n, 1);

      // A project's delete takes its rows.
      await client.query(`DELETE FROM projects WHERE id = 'prj_a'`);
      assert.equal((await client.query(`SELECT count(*)::int AS n FROM campaign_unsubscribes`)).rows[0].n, 0);
    },
  });
});
