import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { verifyDomain } from './helpers/domains.ts';
import { type MailEnv, startMailEnv } from './helpers/mail.ts';
import { waitFor } from './helpers/workflows.ts';
import { lockContactFields as lockContactFieldsOf } from './helpers/locks.ts';

/**
 * A project's campaign audience reads take turns (campaigns/turns.ts): however many of its
 * campaigns are due at once, at most one of their audience statements runs at a time, across
 * every worker, so the other `campaign-send` worker stays free for other projects.
 *
 * A slow audience is made deterministic as in campaigns.audience-timeout.test.ts: another
 * connection holds `contact_fields` locked, which every FILTERED audience statement reads first
 * and an ALL audience and delivery never read. Before the change both workers took project A's
 * campaigns and waited on the lock (up to the 10 s bound each), and project B's campaign, due at
 * the same moment, waited behind all of them.
 */

const DOMAIN = 'turns.example.test';
const FROM = `news@${DOMAIN}`;
const EVERYONE = { logic: 'AND', groups: [{ filters: [{ field: 'data.d', operator: 'olderThan', value: 1, unit: 'minutes' }] }] };
const A_CAMPAIGNS = 6;
const A_CONTACTS = 3;
const B_CONTACTS = 20;

let env: MailEnv;

before(async () => {
  env = await startMailEnv();
});
after(async () => env?.stop());

async function tenantWithContacts(label: string, count: number): Promise<Bootstrapped> {
  const b = await bootstrap(env.server.api, label);
  await verifyDomain(b.sk, env.dns, DOMAIN);
  await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const res = await b.sk.post('/contacts', { email: `${label}${i}@rcpt.test`, data: { d: '2024-05-01T10:00:00Z' } });
      assert.equal(res.status, 201, res.text);
    }),
  );
  return b;
}

async function createCampaign(b: Bootstrapped, audience: object): Promise<string> {
  const res = await b.sk.post('/campaigns', { name: 'Turns', subject: 'Hi', body: '<p>hi</p>', from: FROM, ...audience });
  assert.equal(res.status, 201, res.text);
  return res.body.data.id;
}

async function schedule(b: Bootstrapped, id: string, at: number): Promise<void> {
  const res = await b.sk.post(`/campaigns/${id}/send`, { scheduledFor: new Date(at).toISOString() });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.body.data.status, 'SCHEDULED');
}

const lockContactFields = () => lockContactFieldsOf(env.server.databaseUrl);

/** How many statements wait for the lock on contact_fields: the audience statements under way. */
const audienceStatementsWaiting = async () =>
  (await env.server.sql<{ n: number }>(`SELECT count(*)::int AS n FROM pg_locks WHERE relation = 'contact_fields'::regclass AND NOT granted`))[0].n;

const statusOf = async (id: string) => (await env.server.sql<{ status: string }>(`SELECT status FROM campaigns WHERE id = $1`, [id]))[0].status;

/**
 * Holds contact_fields locked until `campaign` is SENT, once an audience statement waits for it,
 * and answers how long after `due` that was; `onLook` runs at each look.
 */
async function sentWhileAudiencesHeld(campaign: string, due: number, onLook: () => Promise<void> = async () => {}): Promise<number> {
  const lock = await lockContactFields();
  try {
    await waitFor('an audience statement to wait for contact_fields', async () => (await audienceStatementsWaiting()) > 0, 20_000);
    const sent = await waitFor(
      `campaign ${campaign} to be SENT`,
      async () => {
        await onLook();
        return (await statusOf(campaign)) === 'SENT' ? { after: Date.now() - due } : null;
      },
      40_000,
    );
    return sent.after;
  } finally {
    await lock.release();
  }
}

/** Per campaign: its emails, and how many distinct contacts they went to. */
const emailsOf = async (id: string) =>
  (
    await env.server.sql<{ n: number; contacts: number }>(
      `SELECT count(*)::int AS n, count(DISTINCT contact_id)::int AS contacts FROM emails WHERE campaign_id = $1`,
      [id],
    )
  )[0];

/** The campaign's jobs that were told its audience is slow (turns.ts). */
const jobsToldSlow = async (id: string) =>
  (
    await env.server.sql<{ n: number }>(
      `SELECT count(*)::int AS n FROM pgboss.job WHERE name = 'campaign-send' AND data->>'campaignId' = $1 AND data->>'slowAudience' = 'true'`,
      [id],
    )
  )[0].n;

const messagesTo = (label: string) => env.sink.messages.filter((m) => m.envelope.to[0].startsWith(label) && m.envelope.to[0].endsWith('@rcpt.test')).length;

describe('campaign audience reads take turns per project', () => {
  test(
    "one project's slow audiences hold one campaign worker at most: another project's campaign due with them is sent at once",
    { timeout: 180_000 },
    async (t) => {
      const a = await tenantWithContacts('turna', A_CONTACTS);
      const b = await tenantWithContacts('turnb', B_CONTACTS);
      const slow: string[] = [];
      for (let i = 0; i < A_CAMPAIGNS; i++) slow.push(await createCampaign(a, { audienceType: 'FILTERED', audienceCondition: EVERYONE }));
      const other = await createCampaign(b, { audienceType: 'ALL' });

      // All due at the same moment; B's last, so its job comes after A's in the queue.
      const due = Date.now() + 4_000;
      for (const id of slow) await schedule(a, id, due);
      await schedule(b, other, due);
      assert.ok(Date.now() < due - 500, 'scheduled before they are due');

      let mostWaiting = 0;
      // B's campaign, sent while A's audience reads are held (well within the 10 s bound of the one under way).
      const otherSentAfter = await sentWhileAudiencesHeld(other, due, async () => {
        mostWaiting = Math.max(mostWaiting, await audienceStatementsWaiting());
      });
      t.diagnostic(`project B's campaign SENT ${otherSentAfter} ms after due; most audience statements waiting at once: ${mostWaiting}`);
      assert.ok(otherSentAfter < 5_000, `project B's campaign was SENT ${otherSentAfter} ms after it was due (alone: 1-2 s)`);
      assert.equal(mostWaiting, 1, "at most one of project A's audience statements ran at a time");
      assert.deepEqual(await emailsOf(other), { n: B_CONTACTS, contacts: B_CONTACTS });
      await waitFor("B's messages", async () => messagesTo('turnb') === B_CONTACTS, 10_000);

      // A's campaigns, once their audience reads, are each sent exactly once to every contact.
      for (const id of slow) await waitFor(`campaign ${id} to be SENT`, async () => (await statusOf(id)) === 'SENT', 90_000, 100);
      for (const id of slow) assert.deepEqual(await emailsOf(id), { n: A_CONTACTS, contacts: A_CONTACTS });
      await waitFor("A's messages", async () => messagesTo('turna') === A_CAMPAIGNS * A_CONTACTS, 10_000);
      for (const id of slow) {
        const read = await a.sk.get(`/campaigns/${id}`);
        assert.equal(read.status, 200, read.text);
        assert.equal(read.body.status, 'SENT');
        assert.equal(read.body.totalRecipients, A_CONTACTS);
      }
      await new Promise((r) => setTimeout(r, 1_000));
      assert.equal(messagesTo('turna'), A_CAMPAIGNS * A_CONTACTS, 'no duplicate');
      assert.equal(messagesTo('turnb'), B_CONTACTS, 'no duplicate');
    },
  );

  test(
    "two projects' slow audiences hold one campaign worker between them: a third project's campaign due with them is sent at once",
    { timeout: 180_000 },
    async (t) => {
      // Open sign-up: one tenant can be two. Each project's turn alone let each hold a worker for
      // up to the 10 s bound, both workers in all, and the other tenants' campaigns waited.
      const hostile = [await tenantWithContacts('twoa', A_CONTACTS), await tenantWithContacts('twoc', A_CONTACTS)];
      const b = await tenantWithContacts('twob', B_CONTACTS);
      const slow: { tenant: Bootstrapped; id: string }[] = [];
      for (const tenant of hostile) slow.push({ tenant, id: await createCampaign(tenant, { audienceType: 'FILTERED', audienceCondition: EVERYONE }) });
      const other = await createCampaign(b, { audienceType: 'ALL' });

      const due = Date.now() + 4_000;
      for (const { tenant, id } of slow) await schedule(tenant, id, due);
      await schedule(b, other, due);
      assert.ok(Date.now() < due - 500, 'scheduled before they are due');

      const otherSentAfter = await sentWhileAudiencesHeld(other, due);
      t.diagnostic(`the third project's campaign SENT ${otherSentAfter} ms after due`);
      assert.ok(otherSentAfter < 5_000, `the third project's campaign was SENT ${otherSentAfter} ms after it was due (alone: 1-2 s)`);
      assert.deepEqual(await emailsOf(other), { n: B_CONTACTS, contacts: B_CONTACTS });

      // The slow ones, once their reads get through, are each sent exactly once to every contact.
      for (const { id } of slow) await waitFor(`campaign ${id} to be SENT`, async () => (await statusOf(id)) === 'SENT', 90_000, 100);
      for (const { id } of slow) assert.deepEqual(await emailsOf(id), { n: A_CONTACTS, contacts: A_CONTACTS });
      // Each outran the quick bound once: its later jobs were told to read in a slow lane directly.
      for (const { id } of slow) assert.ok((await jobsToldSlow(id)) > 0, `campaign ${id}'s successor jobs read in a slow lane`);
      assert.equal(await jobsToldSlow(other), 0, 'a quick audience stays quick');
      await waitFor('the slow campaigns’ messages', async () => messagesTo('twoa') + messagesTo('twoc') === slow.length * A_CONTACTS, 10_000);
      await new Promise((r) => setTimeout(r, 1_000));
      assert.equal(messagesTo('twoa') + messagesTo('twoc'), slow.length * A_CONTACTS, 'no duplicate');
      assert.equal(messagesTo('twob'), B_CONTACTS, 'no duplicate');
    },
  );
});
