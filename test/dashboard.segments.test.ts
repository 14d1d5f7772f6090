import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import type { Bootstrapped } from './helpers/bootstrap.ts';
import { BROWSER_SETUP_TIMEOUT_MS, journey, screenshot } from './helpers/browser.ts';
import { openDashboard } from './helpers/dashboard.ts';
import { holdLock, waitingForLocks } from './helpers/locks.ts';
import type { TestServer } from './helpers/server.ts';
import { heavyReads } from '../src/http/heavy-reads.ts';

/** The segments pages in a real headless Chromium: the visual condition builder, members, static lists. */

let server: TestServer;
let stop = async () => {};
let page: Page;
let owner: Bootstrapped;

before(
  async () => {
    ({ server, owner, page, stop } = await openDashboard('Segments'));
  },
  { timeout: BROWSER_SETUP_TIMEOUT_MS },
);

after(() => stop());

const base = () => `${server.url}/app/p/${owner.project.id}`;

/** A filter's value input: a text field with suggestions (combobox) or a plain one (textbox). */
const valueInput = (name: string) => page.getByRole('combobox', { name, exact: true }).or(page.getByRole('textbox', { name, exact: true }));

async function choose(label: string, option: string | RegExp) {
  await page
    .getByRole('textbox', { name: label })
    .or(page.getByRole('combobox', { name: label }))
    .first()
    .click();
  await page.getByRole('option', { name: option }).first().click();
}

test('segments: a dynamic segment with two OR groups and a nested group, built visually, with its members', { timeout: 180_000 }, async () => {
  await journey(page, 'segments-dynamic', async () => {
    for (const [email, plan, score] of [
      ['ann@example.org', 'pro', 5],
      ['bob@example.org', 'free', 50],
      ['cat@example.org', 'free', 1],
    ] as const) {
      const made = await owner.sk.post('/contacts', { email, data: { plan, score } });
      assert.ok(made.status === 200 || made.status === 201, made.text);
    }
    const tracked = await owner.pk.post('/v1/track', { email: 'cat@example.org', event: 'purchased' });
    assert.equal(tracked.status, 200, tracked.text);

    const countStatuses: number[] = [];
    page.on('response', (r) => {
      if (r.url().endsWith('/segments/count')) countStatuses.push(r.status());
    });
    await page.goto(`${base()}/segments`);
    await page.getByText('No segments yet').waitFor();
    await page.getByRole('link', { name: 'New segment' }).click();
    await page.getByLabel('Name').fill('Buyers or pros');

    // Group 1: data.plan is "pro".
    await choose('Condition, group 1, filter 1: field', 'data.plan (string)');
    // The values seen for the field are offered.
    await valueInput('Condition, group 1, filter 1: value').click();
    await page.getByRole('option', { name: 'free', exact: true }).waitFor();
    await page.getByRole('option', { name: 'pro', exact: true }).click();
    // Group 2: purchased happened, and (nested) score > 10 or plan is free → only cat matches.
    await page.getByText('any group').first().click();
    await page.getByRole('button', { name: 'Add group' }).click();
    await choose('Condition, group 2, filter 1: field', 'event: purchased');
    await page.getByRole('group', { name: 'Condition, group 2' }).getByRole('button', { name: 'Nest groups' }).click();
    await choose('Condition, group 2, nested, group 1, filter 1: field', 'data.score (number)');
    await choose('Condition, group 2, nested, group 1, filter 1: operator', '<');
    await valueInput('Condition, group 2, nested, group 1, filter 1: value').fill('10');

    await screenshot(page, 'segment-builder');
    // A filter the server refuses (an empty list) is shown under the builder, and nothing is saved.
    await page.getByRole('button', { name: 'Add filter' }).first().click();
    await choose('Condition, group 1, filter 2: operator', 'is one of');
    await page.getByRole('button', { name: 'Create segment' }).click();
    await page.getByTestId('condition-error').waitFor();
    assert.match(await page.getByTestId('condition-error').innerText(), /email/);
    assert.deepEqual((await owner.sk.get('/segments')).body, []);
    await page.getByRole('button', { name: 'Remove Condition, group 1, filter 2' }).click();

    // Counted live before anything is saved.
    await page.getByTestId('live-count').filter({ hasText: /^2$/ }).waitFor();
    assert.deepEqual((await owner.sk.get('/segments')).body, []);
    await page.getByRole('button', { name: 'Create segment' }).click();
    await page.getByText('Segment created').waitFor();
    await page.waitForURL(/\/segments\/[0-9a-f-]{36}$/);
    const id = page.url().split('/').pop()!;
    await page.getByTestId('live-count').filter({ hasText: /^2$/ }).waitFor();

    const saved = await owner.sk.get(`/segments/${id}`);
    assert.equal(saved.status, 200, saved.text);
    assert.equal(saved.body.name, 'Buyers or pros');
    assert.equal(saved.body.type, 'DYNAMIC');
    assert.deepEqual(saved.body.condition, {
      logic: 'OR',
      groups: [
        { filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] },
        {
          filters: [{ field: 'event.purchased', operator: 'triggered' }],
          conditions: { logic: 'AND', groups: [{ filters: [{ field: 'data.score', operator: 'lessThan', value: 10 }] }] },
        },
      ],
    });
    assert.equal(saved.body.memberCount, 2);

    const members = page.getByTestId('segment-members');
    await members.getByRole('link', { name: 'ann@example.org' }).waitFor();
    await members.getByRole('link', { name: 'cat@example.org' }).waitFor();
    assert.equal(await members.getByRole('link', { name: 'bob@example.org' }).count(), 0);
    await page.getByTestId('member-total').filter({ hasText: '(2)' }).waitFor();

    // The builder asked the server to count the unsaved tree (debounced): counted, or refused while the tree held the invalid filter.
    assert.ok(countStatuses.includes(200), `count answers: ${countStatuses.join(', ')}`);
    assert.deepEqual(
      countStatuses.filter((st) => st !== 200 && st !== 400),
      [],
    );

    // The builder loads the stored tree back; removing group 1 leaves cat alone.
    await page.reload();
    await valueInput('Condition, group 1, filter 1: value').waitFor();
    assert.equal(await valueInput('Condition, group 1, filter 1: value').inputValue(), 'pro');
    await page.getByRole('button', { name: 'Remove group (Condition, group 1)', exact: true }).click();
    await page.getByRole('button', { name: 'Save segment' }).click();
    await page.getByText('Segment saved').waitFor();
    await page.getByTestId('member-total').filter({ hasText: '(1)' }).waitFor();
    assert.equal((await owner.sk.get(`/segments/${id}`)).body.memberCount, 1);

    // Listed with its count; referenced from a new segment's builder.
    await page.goto(`${base()}/segments`);
    const row = page.getByRole('row', { name: /Buyers or pros/ });
    await row.waitFor();
    assert.deepEqual((await row.getByRole('cell').allInnerTexts()).slice(0, 4), ['Buyers or pros', 'DYNAMIC', '1', 'no']);
  });
});

test('segments: a reference cycle is refused under the condition builder, not in a toast, and nothing is saved', { timeout: 180_000 }, async () => {
  await journey(page, 'segments-cycle', async () => {
    const filter = (f: Record<string, unknown>) => ({ logic: 'AND', groups: [{ filters: [f] }] });
    const b = await owner.sk.post('/segments', { name: 'Cycle B', condition: filter({ field: 'email', operator: 'contains', value: '@cycle.test' }) });
    assert.equal(b.status, 201, b.text);
    const a = await owner.sk.post('/segments', { name: 'Cycle A', condition: filter({ field: `segment.${b.body.id}`, operator: 'memberOf' }) });
    assert.equal(a.status, 201, a.text);

    await page.goto(`${base()}/segments/${b.body.id}`);
    await page.getByRole('button', { name: 'Add filter' }).first().click();
    await choose('Condition, group 1, filter 2: field', 'in segment: Cycle A');
    await page.getByRole('button', { name: 'Save' }).click();
    const alert = page.getByTestId('condition-error');
    await alert.waitFor();
    assert.match(await alert.innerText(), /^Segment references form a cycle: this segment → /);
    assert.equal(await page.locator('.mantine-Notification-root').count(), 0);
    assert.deepEqual((await owner.sk.get(`/segments/${b.body.id}`)).body.condition, filter({ field: 'email', operator: 'contains', value: '@cycle.test' }));
  });
});

test(
  'segments: values are suggested for text fields only, once the field types are known; a number list says what it refused',
  { timeout: 180_000 },
  async () => {
    await journey(page, 'segments-suggestions', async () => {
      const made = await owner.sk.post('/contacts', { email: 'typed@fields.test', data: { score: 3, vip: true, city: 'Oslo' } });
      assert.ok(made.status === 200 || made.status === 201, made.text);
      const condition = {
        logic: 'AND',
        groups: [
          {
            filters: [
              { field: 'data.score', operator: 'in', value: [3] },
              { field: 'data.vip', operator: 'equals', value: true },
              { field: 'data.city', operator: 'equals', value: 'Oslo' },
            ],
          },
        ],
      };
      const segment = await owner.sk.post('/segments', { name: 'Typed fields', condition });
      assert.equal(segment.status, 201, segment.text);

      const asked: string[] = [];
      const onRequest = (r: { url: () => string }) => {
        const m = /\/contacts\/fields\/([^/?]+)\/values/.exec(r.url());
        if (m) asked.push(decodeURIComponent(m[1]));
      };
      page.on('request', onRequest);
      // The field catalogue answers late, as on a busy server.
      await page.route(/\/contacts\/fields(\?|$)/, async (route) => {
        await new Promise((r) => setTimeout(r, 1500));
        await route.continue();
      });
      try {
        await page.goto(`${base()}/segments/${segment.body.id}`);
        const list = valueInput('Condition, group 1, filter 1: value');
        await list.waitFor();
        await page.waitForResponse(/\/contacts\/fields(\?|$)/);
        await valueInput('Condition, group 1, filter 3: value').click();
        await page.getByRole('option', { name: 'Oslo', exact: true }).waitFor();
        assert.deepEqual(asked, ['data.city']);

        await list.fill('abc');
        await list.press('Enter');
        await page.getByText('Not a number: abc', { exact: true }).waitFor();
        await list.fill('12');
        await list.press('Enter');
        await page.getByText('Not a number: abc').waitFor({ state: 'detached' });
      } finally {
        page.off('request', onRequest);
        await page.unroute(/\/contacts\/fields(\?|$)/);
      }
    });
  },
);

test('segments: a static list with members added and removed, tracked membership turned on', { timeout: 180_000 }, async () => {
  await journey(page, 'segments-static', async () => {
    await page.goto(`${base()}/segments/new`);
    await page.getByLabel('Name').fill('VIP list');
    await page.getByText('Static (a list)').click();
    await page.getByRole('button', { name: 'Create segment' }).click();
    await page.getByText('Segment created').waitFor();
    await page.waitForURL(/\/segments\/[0-9a-f-]{36}$/);
    const id = page.url().split('/').pop()!;
    await page.getByText('No members').waitFor();

    // A bad address among good ones: the notification names it, and nothing is added.
    await page.getByLabel('Add members').fill('ann@example.org, not-an-email');
    await page.getByRole('button', { name: 'Add', exact: true }).click();
    await page.locator('.mantine-Notification-root', { hasText: 'Request validation failed' }).getByText('emails.1: Invalid email address').waitFor();
    assert.equal((await owner.sk.get(`/segments/${id}/contacts`)).body.data.length, 0);

    await page.getByLabel('Add members').fill('ann@example.org, newbie@example.org');
    await page.getByRole('button', { name: 'Add', exact: true }).click();
    await page.getByText('2 added (1 new contact)').waitFor();
    const members = page.getByTestId('segment-members');
    await members.getByRole('link', { name: 'newbie@example.org' }).waitFor();
    await members.getByRole('button', { name: 'Remove ann@example.org' }).click();
    await page.getByText('ann@example.org removed').waitFor();
    await members.getByRole('link', { name: 'ann@example.org' }).waitFor({ state: 'detached' });
    const listed = await owner.sk.get(`/segments/${id}/contacts`);
    assert.deepEqual(
      listed.body.data.map((c: { email: string }) => c.email),
      ['newbie@example.org'],
    );

    await page.getByLabel('Track membership (emit entry and exit events)').check();
    await page.getByRole('button', { name: 'Save segment' }).click();
    await page.getByText('Segment saved').waitFor();
    const saved = await owner.sk.get(`/segments/${id}`);
    assert.equal(saved.body.type, 'STATIC');
    assert.equal(saved.body.trackMembership, true);
    assert.equal(saved.body.memberCount, 1);

    // Deleted after a confirmation; its contacts stay.
    await page.getByRole('button', { name: 'Delete segment' }).click();
    await page.getByRole('dialog', { name: 'Delete this segment?' }).getByRole('button', { name: 'Delete segment' }).click();
    await page.getByText('Segment deleted').waitFor();
    await page.waitForURL(/\/segments$/);
    assert.equal((await owner.sk.get(`/segments/${id}`)).status, 404);
    assert.equal((await owner.sk.get('/contacts?search=newbie%40example.org')).body.data.length, 1);
  });
});

test('campaigns: a filtered audience built with the same builder, saved with the campaign and counted', { timeout: 180_000 }, async () => {
  await journey(page, 'campaign-filter', async () => {
    for (const [email, subscribed] of [
      ['gold1@example.org', true],
      ['gold2@example.org', true],
      ['gold3@example.org', false],
    ] as const) {
      const made = await owner.sk.post('/contacts', { email, subscribed, data: { tier: 'gold' } });
      assert.ok(made.status === 200 || made.status === 201, made.text);
    }
    const label = (text: string) => page.getByLabel(new RegExp(`^${text}( \\*)?$`));
    await page.goto(`${base()}/campaigns/new`);
    await label('Name').fill('Gold news');
    await label('Subject').fill('For our gold members');
    // A sender the project has not verified: the notification says what to do, as the API suggests.
    await label('From address').fill('hi@unverified.test');
    await page.getByRole('button', { name: 'Create draft' }).click();
    await page
      .locator('.mantine-Notification-root', { hasText: 'Domain unverified.test is not verified for this project' })
      .getByText(/^Add the domain with POST \/domains, publish its DNS records/)
      .waitFor();
    await label('From address').fill('hi@sandbox.herald.test');
    // A segment audience with no segment chosen is refused on the field, before any request.
    const creates: string[] = [];
    const onCreate = (r: { method: () => string; url: () => string }) => {
      if (r.method() === 'POST' && r.url().endsWith('/campaigns')) creates.push(r.url());
    };
    page.on('request', onCreate);
    await page.getByText('A segment', { exact: true }).click();
    await page.getByRole('button', { name: 'Create draft' }).click();
    await page.getByText('Choose a segment', { exact: true }).waitFor();
    page.off('request', onCreate);
    assert.deepEqual(creates, []);
    await page.getByText('A filter', { exact: true }).click();
    await choose('Condition, group 1, filter 1: field', 'data.tier (string)');
    await valueInput('Condition, group 1, filter 1: value').fill('gold');
    // The contacts the filter matches show while it is built, before the draft is saved (the unsubscribed one too: left out when sent).
    await page.getByText('Contacts matching now:').waitFor();
    await page.getByTestId('live-count').filter({ hasText: /^3$/ }).waitFor();
    await page.getByRole('button', { name: 'Create draft' }).click();
    await page.waitForURL(/\/campaigns\/[0-9a-f-]{36}$/);
    const id = page.url().split('/').pop()!;
    await page.getByTestId('recipient-count').filter({ hasText: /^2$/ }).waitFor();

    // A refused test send says which field and why, not only 'Request validation failed'.
    await page.getByLabel('Send a test to').fill('not-an-email');
    await page.getByRole('button', { name: 'Send test' }).click();
    await page.locator('.mantine-Notification-root', { hasText: 'Request validation failed' }).getByText('email: Invalid email', { exact: true }).waitFor();

    // A time that has passed is not offered (min is now) and, typed, is refused on the field in the user's time, before any request.
    const when = page.getByLabel('Or schedule for (your time zone)');
    assert.ok(((await when.getAttribute('min')) ?? '') > '2026-01-01T00:00', 'the picker starts at now');
    await when.fill('2020-01-01T09:00');
    const local = await page.evaluate(() => new Date('2020-01-01T09:00').toLocaleString());
    await page.getByText(`${local} has passed: choose a later time`, { exact: true }).waitFor();
    assert.ok(await page.getByRole('button', { name: 'Schedule…' }).isDisabled());

    const saved = await owner.sk.get(`/campaigns/${id}`);
    assert.equal(saved.body.audienceType, 'FILTERED');
    assert.deepEqual(saved.body.audienceCondition, { logic: 'AND', groups: [{ filters: [{ field: 'data.tier', operator: 'equals', value: 'gold' }] }] });
    assert.equal(saved.body.totalRecipients, 2);

    // Reopened, the builder shows the stored filter.
    await page.reload();
    await valueInput('Condition, group 1, filter 1: value').waitFor();
    assert.equal(await valueInput('Condition, group 1, filter 1: value').inputValue(), 'gold');
  });
});

test('segments: members of large data are listed in smaller pages, as the server says fit', { timeout: 180_000 }, async () => {
  // 18 contacts of 960 KB (17.7 MB): a page of 25 is over the 16 MB a numbered page carries; 17 fit.
  const emails = Array.from({ length: 18 }, (_, i) => `heavy${String(i).padStart(2, '0')}@example.org`);
  for (const [i, email] of emails.entries()) {
    for (let k = 0; k < 4; k++) {
      const made = await owner.sk.post('/contacts', { email, data: { [`blob${k}`]: `${i}${k}`.padEnd(240 * 1024, 'x') } });
      assert.ok(made.status === 200 || made.status === 201, made.text.slice(0, 300));
    }
  }
  const seg = await owner.sk.post('/segments', { name: 'Heavy', type: 'STATIC' });
  assert.equal(seg.status, 201, seg.text);
  const added = await owner.sk.post(`/segments/${seg.body.id}/members`, { emails });
  assert.equal(added.status, 200, added.text);

  await page.goto(`${base()}/segments/${seg.body.id}`);
  const members = page.getByTestId('segment-members');
  const heavy = members.getByRole('link', { name: /^heavy\d+@example\.org$/ });
  await heavy.first().waitFor();
  assert.equal(await heavy.count(), 17);
  await page.getByRole('button', { name: '2', exact: true }).click();
  await page.waitForURL(/page=2/);
  await members.getByRole('link', { name: 'heavy00@example.org' }).waitFor();
  assert.equal(await heavy.count(), 1);
  await screenshot(page, 'segments-heavy-members');
});

test('segments: the live count waits while the project’s other counts run, then shows the number', { timeout: 180_000 }, async () => {
  await journey(page, 'segments-count-busy', async () => {
    for (const email of ['wait1@busy.example.org', 'wait2@busy.example.org', 'wait3@busy.example.org']) {
      const made = await owner.sk.post('/contacts', { email, data: { queue: 'busy' } });
      assert.ok(made.status === 200 || made.status === 201, made.text);
    }
    const busyCondition = { logic: 'AND', groups: [{ filters: [{ field: 'data.queue', operator: 'equals', value: 'busy' }] }] };
    const counts: number[] = [];
    page.on('response', (r) => {
      if (r.url().endsWith('/segments/count')) counts.push(r.status());
    });
    await page.goto(`${base()}/segments/new`);
    await page.getByRole('heading', { name: 'New segment' }).waitFor();
    await page
      .getByTestId('live-count')
      .filter({ hasText: /^\d[\d,]*$/ })
      .waitFor();
    // The page's own heavy reads (its field catalog, GET /contacts/fields, may still be running) are
    // over first: one of them holding a slot made a held count below a 429 (a CI run at 729f229).
    for (let i = 0; i < 250 && server.ctx.heavyReads.slots.inFlight(owner.project.id) > 0; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(server.ctx.heavyReads.slots.inFlight(owner.project.id), 0, "the page's own counts and field reads ended");

    // The project's two count slots are taken by counts that wait on a lock of the contacts table.
    const contacts = await holdLock(server.databaseUrl, 'LOCK TABLE contacts IN ACCESS EXCLUSIVE MODE');
    const held = [owner.sk.post('/segments/count', { condition: busyCondition }), owner.sk.post('/segments/count', { condition: busyCondition })];
    const answered: string[] = []; // to tell, in a failure, a held count that never reached the lock
    held.forEach((h, i) => void h.then((r) => answered.push(`count ${i + 1}: ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`)));
    try {
      await waitingForLocks(server.sql, 2, () => {
        const pool = server.ctx.database.pool;
        return `the held counts answered: ${JSON.stringify(answered)}; the page's counts: ${counts.join(', ')}; the server's pool: ${pool.totalCount} open, ${pool.idleCount} idle, ${pool.waitingCount} waiting; heavy reads under way: ${server.ctx.heavyReads.slots.inFlight(owner.project.id)} of the project, ${server.ctx.heavyReads.slots.inFlight()} in all`;
      });
      await choose('Condition, group 1, filter 1: field', 'data.queue (string)');
      await valueInput('Condition, group 1, filter 1: value').fill('busy');
      await page.getByTestId('live-count-waiting').waitFor();
      assert.ok(counts.filter((st) => st === 429).length >= 1, `count answers: ${counts.join(', ')}`);
      assert.equal(await page.getByTestId('live-count-error').count(), 0);
    } finally {
      await contacts.release();
    }
    for (const res of await Promise.all(held)) assert.deepEqual(res.body, { count: 3 });
    // Asked again after the second the 429 named: counted, with no error left on the page.
    await page.getByTestId('live-count').filter({ hasText: /^3$/ }).waitFor();
    await page.getByTestId('live-count-waiting').waitFor({ state: 'detached' });
    assert.equal(await page.getByTestId('live-count-error').count(), 0);
    assert.equal(counts.at(-1), 200);
  });
});

test('segments: the live count says when the project’s counts have taken their share of the time, then shows the number', { timeout: 180_000 }, async () => {
  await journey(page, 'segments-count-budget', async () => {
    const defaultReads = server.ctx.heavyReads;
    // A budget of 1 s at once, then a tenth of the time: a count held 3 s by a lock passes it by about
    // 2 s, 20 s to drain, which leaves a slow machine time to load the page while it is refused.
    server.ctx.heavyReads = heavyReads(20, { burstMs: 1_000, sustainedShare: 0.1 });
    try {
      const condition = { logic: 'AND', groups: [{ filters: [{ field: 'email', operator: 'endsWith', value: '@example.org' }] }] };
      const contacts = await holdLock(server.databaseUrl, 'LOCK TABLE contacts IN ACCESS EXCLUSIVE MODE');
      let held: ReturnType<typeof owner.sk.post>;
      try {
        held = owner.sk.post('/segments/count', { condition });
        await waitingForLocks(server.sql, 1);
        await new Promise((r) => setTimeout(r, 3_000));
      } finally {
        await contacts.release();
      }
      assert.equal((await held).status, 200);
      const counts: number[] = [];
      page.on('response', (r) => {
        if (r.url().endsWith('/segments/count')) counts.push(r.status());
      });
      await page.goto(`${base()}/segments/new`);
      await page.getByRole('heading', { name: 'New segment' }).waitFor();
      const waiting = page.getByTestId('live-count-waiting');
      const said = /^This project's counts took more than their share of the server lately; trying again in (\d+) s…$/;
      await waiting.filter({ hasText: said }).waitFor();
      const seconds = Number(said.exec((await waiting.textContent()) ?? '')?.[1]);
      assert.ok(seconds >= 2 && seconds <= 20, `trying again in ${seconds} s`);
      await screenshot(page, 'segments-count-budget');
      assert.equal(counts[0], 429);
      // Asked again after the seconds the 429 named: counted.
      await page
        .getByTestId('live-count')
        .filter({ hasText: /^\d[\d,]*$/ })
        .waitFor();
      await waiting.waitFor({ state: 'detached' });
      assert.equal(await page.getByTestId('live-count-error').count(), 0);
      assert.equal(counts.at(-1), 200);
    } finally {
      server.ctx.heavyReads = defaultReads;
    }
  });
});
