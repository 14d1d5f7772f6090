import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestDns, startTestDns } from './helpers/dns-server.ts';
import { verifyDomain } from './helpers/domains.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/**
 * An event name used by a campaign's audience condition is in use as it is for a field: GET
 * /events/:eventName/usage lists the campaigns not yet sent (DRAFT, SCHEDULED, SENDING) whose
 * FILTERED audience references `event.<name>`, and DELETE /events/:eventName is a 409 while there
 * is one. Before, a scheduled campaign was ignored: usage said canDelete true and the delete left it
 * with a silently empty audience.
 */

const DOMAIN = 'evu.example.test';
const FROM = `news@${DOMAIN}`;

let dns: TestDns;
let server: TestServer;
let b: Bootstrapped;

before(async () => {
  dns = await startTestDns();
  server = await startTestServer({ DNS_SERVERS: dns.address });
  b = await bootstrap(server.api, 'event usage');
  await verifyDomain(b.sk, dns, DOMAIN);
  for (const email of ['buyer@evu.test', 'other@evu.test']) {
    const res = await b.pk.post('/v1/track', { email, event: email.startsWith('buyer') ? 'purchased' : 'browsed' });
    assert.equal(res.status, 200, res.text);
  }
});
after(async () => {
  await server?.stop();
  await dns?.stop();
});

const triggered = (event: string) => ({ logic: 'AND', groups: [{ filters: [{ field: `event.${event}`, operator: 'triggered' }] }] });

async function filteredCampaign(name: string, condition: unknown): Promise<string> {
  const res = await b.sk.post('/campaigns', { name, subject: 'Hi', body: '<p>Hi</p>', from: FROM, audienceType: 'FILTERED', audienceCondition: condition });
  assert.equal(res.status, 201, res.text);
  return res.body.data.id;
}

describe('event usage by campaigns', () => {
  test('a scheduled or draft FILTERED campaign on event.<name> is listed by usage, and the name cannot be deleted (409) until it is gone', async () => {
    const scheduled = await filteredCampaign('Thanks buyers', triggered('purchased'));
    const send = await b.sk.post(`/campaigns/${scheduled}/send`, { scheduledFor: new Date(Date.now() + 3_600_000).toISOString() });
    assert.equal(send.status, 200, send.text);
    assert.equal(send.body.data.status, 'SCHEDULED');
    const draft = await filteredCampaign('Win back', {
      logic: 'OR',
      groups: [{ filters: [{ field: 'data.x', operator: 'exists' }] }, triggered('purchased').groups[0]],
    });
    await filteredCampaign('Browsers', triggered('browsed'));

    const usage = await b.sk.get('/events/purchased/usage');
    assert.equal(usage.status, 200, usage.text);
    assert.deepEqual(usage.body, {
      segments: [],
      campaigns: [
        { id: scheduled, name: 'Thanks buyers' },
        { id: draft, name: 'Win back' },
      ],
      workflows: [],
      eventCount: 1,
      canDelete: false,
    });

    const refused = await b.sk.delete('/events/purchased');
    assert.equal(refused.status, 409, refused.text);
    assert.equal(refused.body.error.code, 'CONFLICT');
    assert.deepEqual(refused.body.error.details, {
      eventName: 'purchased',
      segments: [],
      campaigns: [
        { id: scheduled, name: 'Thanks buyers' },
        { id: draft, name: 'Win back' },
      ],
      workflows: [],
    });
    assert.equal((await b.sk.get('/events?name=purchased')).body.total, 1, 'nothing was deleted');

    // Once the campaigns are gone the name is free again.
    assert.equal((await b.sk.post(`/campaigns/${scheduled}/cancel`, {})).status, 200);
    for (const id of [scheduled, draft]) assert.equal((await b.sk.delete(`/campaigns/${id}`)).status, 204);
    const free = await b.sk.get('/events/purchased/usage');
    assert.deepEqual(free.body, { segments: [], campaigns: [], workflows: [], eventCount: 1, canDelete: true });
    assert.equal((await b.sk.delete('/events/purchased')).status, 204);
    assert.equal((await b.sk.get('/events?name=purchased')).body.total, 0);
  });
});
