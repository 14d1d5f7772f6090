import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestDns, startTestDns } from './helpers/dns-server.ts';
import { verifyDomain } from './helpers/domains.ts';
import type { Api } from './helpers/http.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { type SmtpSink, startSmtpSink } from './helpers/smtp-sink.ts';
import { waitFor } from './helpers/workflows.ts';

let dns: TestDns;
let sink: SmtpSink;
let server: TestServer;
let b: Bootstrapped;
const FROM = 'news@camp.example.test';

before(async () => {
  dns = await startTestDns();
  sink = await startSmtpSink();
  server = await startTestServer({ DNS_SERVERS: dns.address, SMTP_URL: sink.url, SEND_RATE_PER_SECOND: '1000' });
  b = await bootstrap(server.api);
  await verifyDomain(b.sk, dns, 'camp.example.test');
});
after(async () => {
  await server?.stop();
  await sink?.stop();
  await dns?.stop();
});

const campaign = (over: Record<string, unknown> = {}) => ({
  name: 'Spring news',
  subject: 'Hello {{firstName ?? "there"}}',
  body: '<p>Hi {{firstName ?? "there"}}, spring is here.</p>',
  from: FROM,
  ...over,
});

async function createCampaign(api: Api, over: Record<string, unknown> = {}) {
  const res = await api.post('/campaigns', campaign(over));
  assert.equal(res.status, 201, res.text);
  return res.body.data;
}

const waitForStatus = (api: Api, id: string, status: string) =>
  waitFor(`campaign ${id} to be ${status}`, async () => {
    const res = await api.get(`/campaigns/${id}`);
    return res.body.status === status ? res.body : null;
  });

describe('campaign records', () => {
  let p: Bootstrapped;
  before(async () => {
    p = await bootstrap(server.api, 'records');
    await verifyDomain(p.sk, dns, 'camp.example.test');
    for (const [email, subscribed] of [
      ['a@r.test', true],
      ['b@r.test', true],
      ['c@r.test', false],
    ] as const) {
      assert.equal((await p.sk.post('/contacts', { email, subscribed })).status, 201);
    }
  });

  test('POST /campaigns creates a DRAFT with defaults, wrapped in { success, data }', async () => {
    const res = await p.sk.post('/campaigns', campaign({ description: 'Quarterly', fromName: 'Herald News', replyTo: 'Reply@R.test' }));
    assert.equal(res.status, 201, res.text);
    assert.equal(res.body.success, true);
    const c = res.body.data;
    assert.match(c.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(c.projectId, p.project.id);
    assert.equal(c.status, 'DRAFT');
    assert.equal(c.type, 'MARKETING');
    assert.equal(c.audienceType, 'ALL');
    assert.equal(c.segmentId, null);
    assert.equal(c.audienceCondition, null);
    assert.equal(c.scheduledFor, null);
    assert.equal(c.sentAt, null);
    assert.equal(c.from, FROM);
    assert.equal(c.fromName, 'Herald News');
    assert.equal(c.replyTo, 'reply@r.test');
    assert.equal(c.description, 'Quarterly');
    assert.equal(c.totalRecipients, 2, 'a MARKETING campaign to ALL counts subscribed contacts only');
    for (const k of ['sentCount', 'deliveredCount', 'openedCount', 'clickedCount', 'bouncedCount']) assert.equal(c[k], 0, k);
    const got = await p.sk.get(`/campaigns/${c.id}`);
    assert.equal(got.status, 200);
    assert.deepEqual({ ...got.body, updatedAt: c.updatedAt }, c);
  });

  test('a TRANSACTIONAL campaign counts unsubscribed contacts too; the count follows the audience while DRAFT', async () => {
    const c = await createCampaign(p.sk, { type: 'TRANSACTIONAL' });
    assert.equal(c.totalRecipients, 3);
    assert.equal((await p.sk.post('/contacts', { email: 'd@r.test' })).status, 201);
    const again = await p.sk.get(`/campaigns/${c.id}`);
    assert.equal(again.body.totalRecipients, 4);
    const contact = await p.sk.post('/contacts', { email: 'd@r.test' });
    assert.equal((await p.sk.delete(`/contacts/${contact.body.id}`)).status, 204);
    assert.equal((await p.sk.get(`/campaigns/${c.id}`)).body.totalRecipients, 3);
  });

  test("GET /campaigns/:id is 404 CAMPAIGN_NOT_FOUND for unknown, malformed and other projects' ids", async () => {
    const mine = await createCampaign(p.sk);
    for (const id of ['0190f0a0-0000-7000-8000-000000000000', 'not-a-uuid']) {
      const res = await p.sk.get(`/campaigns/${id}`);
      assert.equal(res.status, 404);
      assert.equal(res.body.error.code, 'CAMPAIGN_NOT_FOUND');
      assert.deepEqual(res.body.error.details, { resource: 'campaign', id });
    }
    const other = await b.sk.get(`/campaigns/${mine.id}`);
    assert.equal(other.status, 404);
    assert.equal((await b.sk.put(`/campaigns/${mine.id}`, { name: 'x' })).status, 404);
    assert.equal((await b.sk.delete(`/campaigns/${mine.id}`)).status, 404);
    assert.equal((await b.sk.post(`/campaigns/${mine.id}/send`, {})).status, 404);
  });

  test('PUT replaces the given fields in DRAFT and recounts the audience', async () => {
    const c = await createCampaign(p.sk, { fromName: 'Old' });
    const res = await p.sk.put(`/campaigns/${c.id}`, {
      name: 'Renamed',
      subject: 'New subject',
      fromName: null,
      type: 'TRANSACTIONAL',
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.name, 'Renamed');
    assert.equal(res.body.subject, 'New subject');
    assert.equal(res.body.body, c.body, 'absent fields keep their value');
    assert.equal(res.body.fromName, null, 'null clears an optional field');
    assert.equal(res.body.type, 'TRANSACTIONAL');
    assert.equal(res.body.totalRecipients, 3);
    assert.ok(Date.parse(res.body.updatedAt) >= Date.parse(c.updatedAt));
  });

  test('duplicate makes a DRAFT copy named "(copy)"; delete removes a DRAFT', async () => {
    const c = await createCampaign(p.sk, { name: 'Original', type: 'HEADLESS' });
    const dup = await p.sk.post(`/campaigns/${c.id}/duplicate`);
    assert.equal(dup.status, 201, dup.text);
    assert.notEqual(dup.body.id, c.id);
    assert.equal(dup.body.name, 'Original (copy)');
    assert.equal(dup.body.status, 'DRAFT');
    assert.equal(dup.body.type, 'HEADLESS');
    assert.equal(dup.body.subject, c.subject);
    assert.equal(dup.body.body, c.body);
    assert.equal(dup.body.totalRecipients, 2);
    const del = await p.sk.delete(`/campaigns/${dup.body.id}`);
    assert.equal(del.status, 204);
    assert.equal(del.text, '');
    assert.equal((await p.sk.get(`/campaigns/${dup.body.id}`)).status, 404);
  });
});

describe('GET /campaigns', () => {
  let p: Bootstrapped;
  let domainId: string;
  before(async () => {
    p = await bootstrap(server.api, 'lists');
    domainId = (await verifyDomain(p.sk, dns, 'camp.example.test')).id;
    await p.sk.post('/contacts', { email: 'only@l.test' });
    for (const name of ['delta', 'Alpha', 'charlie', 'Bravo', 'echo']) await createCampaign(p.sk, { name, subject: `About ${name}` });
    const scheduled = await createCampaign(p.sk, { name: 'Foxtrot', subject: 'Later' });
    const res = await p.sk.post(`/campaigns/${scheduled.id}/send`, { scheduledFor: new Date(Date.now() + 3_600_000).toISOString() });
    assert.equal(res.status, 200, res.text);
  });

  test('pages newest first by default with total and totalPages', async () => {
    const res = await p.sk.get('/campaigns?pageSize=4');
    assert.equal(res.status, 200);
    assert.equal(res.body.total, 6);
    assert.equal(res.body.page, 1);
    assert.equal(res.body.pageSize, 4);
    assert.equal(res.body.totalPages, 2);
    assert.deepEqual(
      res.body.data.map((c: { name: string }) => c.name),
      ['Foxtrot', 'echo', 'Bravo', 'charlie'],
    );
    const second = await p.sk.get('/campaigns?pageSize=4&page=2');
    assert.deepEqual(
      second.body.data.map((c: { name: string }) => c.name),
      ['Alpha', 'delta'],
    );
  });

  test('sorts by name case-insensitively; an unknown sort falls back to createdAt', async () => {
    const res = await p.sk.get('/campaigns?sort=name&dir=asc');
    assert.deepEqual(
      res.body.data.map((c: { name: string }) => c.name),
      ['Alpha', 'Bravo', 'charlie', 'delta', 'echo', 'Foxtrot'],
    );
    const fallback = await p.sk.get('/campaigns?sort=bogus&dir=asc');
    assert.equal(fallback.status, 200);
    assert.equal(fallback.body.data[0].name, 'delta');
  });

  test('filters by status and searches name, subject and sender', async () => {
    const scheduled = await p.sk.get('/campaigns?status=SCHEDULED');
    assert.deepEqual(
      scheduled.body.data.map((c: { name: string }) => c.name),
      ['Foxtrot'],
    );
    assert.equal(scheduled.body.total, 1);
    assert.equal((await p.sk.get('/campaigns?status=draft')).body.total, 5, 'the status filter ignores case');
    assert.equal((await p.sk.get('/campaigns?status=SENT')).body.total, 0);
    assert.deepEqual(
      (await p.sk.get('/campaigns?search=ALPH')).body.data.map((c: { name: string }) => c.name),
      ['Alpha'],
    );
    assert.deepEqual(
      (await p.sk.get('/campaigns?search=later')).body.data.map((c: { name: string }) => c.name),
      ['Foxtrot'],
    );
    assert.equal((await p.sk.get('/campaigns?search=camp.example')).body.total, 6);
    assert.equal((await p.sk.get('/campaigns?search=100%25')).body.total, 0, 'LIKE wildcards are literal');
  });

  test('GET /activity/upcoming lists the scheduled campaign; cancelling it returns it to DRAFT', async () => {
    const [foxtrot] = (await p.sk.get('/campaigns?status=SCHEDULED')).body.data;
    const domainDelete = await p.sk.delete(`/domains/${domainId}`);
    assert.equal(domainDelete.status, 409, 'the scheduled campaign still sends from the domain');
    assert.match(domainDelete.text, /Foxtrot/);
    const upcoming = await p.sk.get('/activity/upcoming');
    assert.equal(upcoming.status, 200, upcoming.text);
    const item = upcoming.body.data.find((i: { id: string }) => i.id === foxtrot.id);
    assert.ok(item, upcoming.text);
    assert.equal(item.type, 'campaign');
    assert.equal(item.name, 'Foxtrot');
    assert.equal(item.scheduledFor, foxtrot.scheduledFor);
    const cancelled = await p.sk.post(`/campaigns/${foxtrot.id}/cancel`);
    assert.equal(cancelled.status, 200, cancelled.text);
    assert.equal(cancelled.body.status, 'DRAFT');
    assert.equal(cancelled.body.scheduledFor, null);
    const after = await p.sk.get('/activity/upcoming');
    assert.equal(
      after.body.data.some((i: { id: string }) => i.id === foxtrot.id),
      false,
    );
  });
});

describe('test emails and stats', () => {
  let p: Bootstrapped;
  before(async () => {
    p = await bootstrap(server.api, 'stats');
    await verifyDomain(p.sk, dns, 'camp.example.test');
  });

  test('POST /campaigns/:id/test sends one [Test] email, rendered for that address, to an unsubscribed address too', async () => {
    await p.sk.post('/contacts', { email: 'tester@s.test', subscribed: false, data: { firstName: 'Tess' } });
    const c = await createCampaign(p.sk);
    const res = await p.sk.post(`/campaigns/${c.id}/test`, { email: 'Tester@S.test' });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.to, 'tester@s.test');
    assert.equal(res.body.status, 'QUEUED');
    assert.equal(res.body.subject, '[Test] Hello {{firstName ?? "there"}}');
    const msg = await waitFor('the test email', async () => sink.messages.find((m) => m.envelope.to.includes('tester@s.test')));
    assert.equal(msg.parsed.subject, '[Test] Hello Tess');
    assert.match(String(msg.parsed.html), /Hi Tess, spring is here\./);
    const email = await p.sk.get(`/emails/${res.body.id}`);
    assert.equal(email.body.campaignId, null, 'a test email belongs to no campaign');
    const stats = await p.sk.get(`/campaigns/${c.id}/stats`);
    assert.equal(stats.body.sentCount, 0);
    assert.equal((await p.sk.get(`/campaigns/${c.id}`)).body.status, 'DRAFT', 'a test send does not change the campaign');
  });

  test('a new address gets the test email and becomes an unsubscribed contact', async () => {
    const c = await createCampaign(p.sk);
    const res = await p.sk.post(`/campaigns/${c.id}/test`, { email: 'fresh@s.test' });
    assert.equal(res.status, 200, res.text);
    await waitFor('the test email', async () => sink.messages.find((m) => m.envelope.to.includes('fresh@s.test')));
    const found = await p.sk.post('/contacts/lookup', { emails: ['fresh@s.test'] });
    const contact = await p.sk.get(`/contacts/${found.body.found[0].id}`);
    assert.equal(contact.body.subscribed, false);
  });

  test('GET /campaigns/:id/stats counts sends, unique opens and clicks, with rates in percent of sent', async () => {
    const emails = ['s1@s.test', 's2@s.test', 's3@s.test', 's4@s.test'];
    for (const email of emails) await p.sk.post('/contacts', { email });
    const c = await createCampaign(p.sk, {
      name: 'Stats',
      subject: 'Stats for {{email}}',
      body: '<p>Read <a href="https://example.org/article">the article</a></p>',
    });
    const draft = await p.sk.get(`/campaigns/${c.id}/stats`);
    assert.deepEqual(draft.body, {
      totalRecipients: 4,
      sentCount: 0,
      deliveredCount: 0,
      openedCount: 0,
      clickedCount: 0,
      bouncedCount: 0,
      complainedCount: 0,
      unsubscribedCount: 0,
      openRate: 0,
      clickRate: 0,
      bounceRate: 0,
      deliveryRate: 0,
    });
    const sent = await p.sk.post(`/campaigns/${c.id}/send`, {});
    assert.equal(sent.status, 200, sent.text);
    await waitForStatus(p.sk, c.id, 'SENT');
    const messages = emails.map((e) => sink.messages.find((m) => m.envelope.to.includes(e) && m.parsed.subject === `Stats for ${e}`)!);
    assert.ok(messages.every(Boolean));
    const base = new URL(server.url);
    const tracked = (html: string, kind: 'o' | 'c') => {
      const m = new RegExp(`https?://[^"']*/t/${kind}/[^"']+`).exec(html);
      assert.ok(m, `no /t/${kind}/ link in ${html}`);
      const u = new URL(m[0].replaceAll('&amp;', '&'));
      return `${base.origin}${u.pathname}${u.search}`;
    };
    // Two opens of one email count once; one click (which also implies an open) on another.
    const open1 = tracked(String(messages[0].parsed.html), 'o');
    assert.equal((await fetch(open1)).status, 200);
    assert.equal((await fetch(open1)).status, 200);
    const click2 = await fetch(tracked(String(messages[1].parsed.html), 'c'), { redirect: 'manual' });
    assert.equal(click2.status, 302);
    // A recipient unsubscribes through the page linked from the email.
    const unsubscribe = /https?:\/\/[^"']*\/unsubscribe\/[^"'\s>]+/.exec(String(messages[2].parsed.html));
    assert.ok(unsubscribe);
    const u = new URL(unsubscribe[0]);
    assert.equal((await fetch(`${base.origin}${u.pathname}`, { method: 'POST' })).status, 200);

    const stats = await waitFor('opens and clicks in the stats', async () => {
      const res = await p.sk.get(`/campaigns/${c.id}/stats`);
      return res.body.clickedCount === 1 && res.body.openedCount >= 1 ? res.body : null;
    });
    assert.equal(stats.totalRecipients, 4);
    assert.equal(stats.sentCount, 4);
    assert.equal(stats.deliveredCount, 0, 'an SMTP relay accepting a message is not a delivery notification');
    assert.equal(stats.bouncedCount, 0);
    assert.equal(stats.clickedCount, 1);
    assert.equal(stats.clickRate, 25);
    assert.equal(stats.openRate, stats.openedCount * 25);
    assert.equal(stats.unsubscribedCount, 1);
    const record = (await p.sk.get(`/campaigns/${c.id}`)).body;
    assert.equal(record.sentCount, 4);
    assert.equal(record.clickedCount, 1);
    assert.equal(record.openedCount, stats.openedCount);
  });
});

describe("a campaign's unsubscribes", () => {
  let p: Bootstrapped;
  before(async () => {
    p = await bootstrap(server.api, 'unsubscribes');
    await verifyDomain(p.sk, dns, 'camp.example.test');
  });

  const sendNow = async (name: string) => {
    const c = await createCampaign(p.sk, { name, subject: `${name} for {{email}}` });
    assert.equal((await p.sk.post(`/campaigns/${c.id}/send`, {})).status, 200);
    await waitForStatus(p.sk, c.id, 'SENT');
    return c.id as string;
  };
  const unsubscribed = async (id: string) => {
    const stats = (await p.sk.get(`/campaigns/${id}/stats`)).body;
    const breakdown = await p.sk.get(`/analytics/campaign-stats?campaignId=${id}`);
    assert.equal(breakdown.status, 200, breakdown.text);
    assert.equal(breakdown.body.stats.unsubscribedCount, stats.unsubscribedCount);
    return { stats: stats.unsubscribedCount as number, series: breakdown.body.series.totals.unsubscribed as number };
  };

  test('count each recipient once, for the campaign whose link they used, or every campaign sent to them before; they stay when the contact goes', async () => {
    const ids: Record<string, string> = {};
    for (const email of ['u1@u.test', 'u2@u.test', 'u3@u.test']) {
      const created = await p.sk.post('/contacts', { email });
      assert.equal(created.status, 201, created.text);
      ids[email] = created.body.id;
    }
    const first = await sendNow('First');
    const second = await sendNow('Second');

    // u1 unsubscribes through the link in the second campaign's email: that campaign only.
    const mail = sink.messages.find((m) => m.envelope.to.includes('u1@u.test') && m.parsed.subject === 'Second for u1@u.test');
    assert.ok(mail);
    const link = /https?:\/\/[^"']*\/unsubscribe\/[^"'\s>]+/.exec(String(mail.parsed.html));
    assert.ok(link);
    assert.equal((await fetch(`${server.url}${new URL(link[0]).pathname}`, { method: 'POST' })).status, 200);
    const [secondEmail] = (await p.sk.get(`/emails?campaignId=${second}&contactId=${ids['u1@u.test']}`)).body.data;
    const events = (await p.sk.get(`/events/contact/${ids['u1@u.test']}`)).body.data as { name: string; data: unknown }[];
    assert.deepEqual(
      events.filter((e) => e.name === 'contact.unsubscribed').map((e) => e.data),
      [{ source: 'unsubscribe_link', emailId: secondEmail.id }],
      'the event names the email whose link it was',
    );
    // u2 through the API: every campaign sent to it before. u3 twice, resubscribed in between: once.
    assert.equal((await p.sk.patch(`/contacts/${ids['u2@u.test']}`, { subscribed: false })).status, 200);
    for (const subscribed of [false, true, false]) assert.equal((await p.sk.patch(`/contacts/${ids['u3@u.test']}`, { subscribed })).status, 200);

    assert.deepEqual(await unsubscribed(first), { stats: 2, series: 2 });
    assert.deepEqual(await unsubscribed(second), { stats: 3, series: 3 });

    // u2 comes back and gets a third campaign: the unsubscribes before it are not its own.
    assert.equal((await p.sk.patch(`/contacts/${ids['u2@u.test']}`, { subscribed: true })).status, 200);
    const third = await sendNow('Third');
    assert.equal((await p.sk.get(`/campaigns/${third}`)).body.totalRecipients, 1);
    assert.deepEqual(await unsubscribed(third), { stats: 0, series: 0 });

    // A deleted contact's unsubscribe stays counted, as its opens and clicks do.
    assert.equal((await p.sk.delete(`/contacts/${ids['u3@u.test']}`)).status, 204);
    assert.deepEqual(await unsubscribed(first), { stats: 2, series: 2 });
    assert.deepEqual(await unsubscribed(second), { stats: 3, series: 3 });
  });
});
