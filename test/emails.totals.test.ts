import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { EMAIL_STATUSES } from '../src/modules/emails/schemas.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { verifyDomain } from './helpers/domains.ts';
import { type MailEnv, startMailEnv, waitForStatus } from './helpers/mail.ts';

/**
 * GET /emails' `total` of a project, and of each status, comes from counters that the statements
 * writing emails keep (migration 0018), and a rare status's page from its own index: both must
 * agree with the emails listed, through sends, deliveries, bounces, suppressions, a contact's
 * delete and a project's reset, one project never counting another's. (Every test server also
 * compares the counters with the emails stored when it stops: test/helpers/server.ts.)
 */

let env: MailEnv;
let a: Bootstrapped;
let other: Bootstrapped;
const FROM = 'news@totals.example.test';

before(async () => {
  env = await startMailEnv();
  a = await bootstrap(env.server.api, 'Totals');
  other = await bootstrap(env.server.api, 'Bystander');
  await verifyDomain(a.sk, env.dns, 'totals.example.test');
  await verifyDomain(other.sk, env.dns, 'totals.example.test');
});
after(async () => env?.stop());

const send = async (b: Bootstrapped, to: string, extra: Record<string, unknown> = {}) => {
  const res = await b.sk.post('/v1/send', { to, from: FROM, subject: 'Hi', body: '<p>Hi</p>', subscribed: true, ...extra });
  assert.equal(res.status, 200, res.text);
  return res.body.data.emails[0] as { email: string; status: string; contact: { id: string } };
};

/** Each status's `total` next to the number of the project's listed emails of that status (all of them fit a page). */
async function totalsOf(b: Bootstrapped) {
  const all = await b.sk.get('/emails?limit=100');
  assert.equal(all.status, 200, all.text);
  assert.ok(all.body.data.length < 100);
  const byStatus: Record<string, [number, number]> = {};
  for (const status of EMAIL_STATUSES) {
    const res = await b.sk.get(`/emails?status=${status}&limit=100`);
    assert.equal(res.status, 200, res.text);
    const listed = all.body.data.filter((e: { status: string }) => e.status === status).length;
    assert.equal(res.body.data.length, listed, status);
    if (res.body.total !== 0 || listed !== 0) byStatus[status] = [res.body.total, listed];
  }
  return { total: all.body.total as number, listed: all.body.data.length as number, byStatus };
}

test('the totals of a project and of each status match its emails through delivery, bounces, suppression, a delete and a reset', async () => {
  // Two hard bounces (the sink refuses the recipient), two delivered, one marketing mail to an unsubscribed contact.
  const bounced: string[] = [];
  for (const to of ['gone1@totals.test', 'gone2@totals.test']) {
    env.sink.failNext({ stage: 'rcpt', code: 550, message: '5.1.1 no such user' });
    const e = await send(a, to);
    await waitForStatus(a.sk, e.email, ['BOUNCED']);
    bounced.unshift(e.email);
  }
  const delivered = [await send(a, 'ok1@totals.test'), await send(a, 'ok2@totals.test')];
  for (const e of delivered) await waitForStatus(a.sk, e.email, ['SENT']);
  const template = await a.sk.post('/templates', { name: 'm', subject: 'News', body: '<p>News</p>', from: FROM, type: 'MARKETING' });
  assert.equal(template.status, 201, template.text);
  assert.equal((await a.sk.post('/v1/send', { to: 'out@totals.test', template: template.body.id })).body.data.emails[0].status, 'SKIPPED');
  // A bounced address is suppressed: the next send to it is recorded SUPPRESSED and never queued.
  assert.equal((await send(a, 'gone1@totals.test')).status, 'SUPPRESSED');
  await send(other, 'ok1@totals.test');

  const expected = { BOUNCED: [2, 2], SENT: [2, 2], SKIPPED: [1, 1], SUPPRESSED: [1, 1] };
  assert.deepEqual(await totalsOf(a), { total: 6, listed: 6, byStatus: expected });
  const otherTotal = (await other.sk.get('/emails')).body.total;
  assert.equal(otherTotal, 1);

  // A rare status's page, newest first, one at a time through its cursor.
  const first = await a.sk.get('/emails?status=BOUNCED&limit=1');
  assert.deepEqual([first.body.data.map((e: { id: string }) => e.id), first.body.total], [[bounced[0]], 2]);
  const second = await a.sk.get(`/emails?status=BOUNCED&limit=1&cursor=${first.body.cursor}`);
  assert.deepEqual(
    second.body.data.map((e: { id: string }) => e.id),
    [bounced[1]],
  );

  // Deleting a contact keeps its emails (without their contact), and so their counts.
  assert.equal((await a.sk.delete(`/contacts/${delivered[0].contact.id}`)).status, 204);
  assert.deepEqual(await totalsOf(a), { total: 6, listed: 6, byStatus: expected });

  const reset = await env.server.api.post(`/users/@me/projects/${a.project.id}/reset`, undefined, { cookie: a.cookie });
  assert.equal(reset.status, 200, reset.text);
  assert.deepEqual(await totalsOf(a), { total: 0, listed: 0, byStatus: {} });
  assert.equal((await other.sk.get('/emails')).body.total, 1);

  // Counting goes on after the reset.
  await waitForStatus(a.sk, (await send(a, 'ok3@totals.test')).email, ['SENT']);
  assert.deepEqual(await totalsOf(a), { total: 1, listed: 1, byStatus: { SENT: [1, 1] } });
});
