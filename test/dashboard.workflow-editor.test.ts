import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { BROWSER_SETUP_TIMEOUT_MS, journey, launchBrowser, openPage } from './helpers/browser.ts';
import { type TestDns, startTestDns } from './helpers/dns-server.ts';
import { verifyDomain } from './helpers/domains.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { type SmtpSink, startSmtpSink } from './helpers/smtp-sink.ts';
import { buildWorkflow, testClock, waitFor } from './helpers/workflows.ts';

/** The workflow editor in a real headless Chromium: building a welcome series that then runs, inserting and removing steps. */

const DOMAIN = 'editor.example.test';
const MINUTE = 60_000;

let dns: TestDns;
let sink: SmtpSink;
let server: TestServer;
let browser: Browser;
let page: Page;
let owner: Bootstrapped;
const clock = testClock();

before(
  async () => {
    dns = await startTestDns();
    sink = await startSmtpSink();
    server = await startTestServer({ DNS_SERVERS: dns.address, SMTP_URL: sink.url, SEND_RATE_PER_SECOND: '1000' }, { clock });
    owner = await bootstrap(server.api, 'Workflow editor');
    await verifyDomain(owner.sk, dns, DOMAIN);
    browser = await launchBrowser();
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const [name, value] = owner.cookie.split('=');
    await context.addCookies([{ name, value, url: server.url }]);
    page = await openPage(context);
  },
  { timeout: BROWSER_SETUP_TIMEOUT_MS },
);

after(async () => {
  await browser?.close();
  await server?.stop();
  await sink?.stop();
  await dns?.stop();
});

const base = () => `${server.url}/app/p/${owner.project.id}`;

async function template(name: string, subject: string): Promise<string> {
  const res = await owner.sk.post('/templates', { name, subject, body: '<p>Hi {{email}}</p>', from: `hello@${DOMAIN}`, type: 'TRANSACTIONAL' });
  assert.equal(res.status, 201, res.text);
  return res.body.id;
}

/** Opens a select or autocomplete by its label and picks an option. */
async function choose(label: string, option: string | RegExp) {
  const dialog = page.getByRole('dialog');
  await dialog
    .getByRole('textbox', { name: label })
    .or(dialog.getByRole('combobox', { name: label }))
    .first()
    .click();
  await page.getByRole('option', { name: option }).first().click();
}

/** Adds a step through the "Add step" button named `where`: the type, a name, then `fill` for its fields. */
async function addStep(where: string, type: string, name: string, fill: () => Promise<void>) {
  await page.getByRole('button', { name: `Add step ${where}`, exact: true }).click();
  const dialog = page.getByRole('dialog');
  await dialog.waitFor();
  if (type !== 'Send email') await choose('Step type', type);
  await dialog.getByLabel('Name (optional)').fill(name);
  await fill();
  await dialog.getByRole('button', { name: 'Add step', exact: true }).click();
  await dialog.waitFor({ state: 'hidden' });
  await page.getByRole('button', { name: `Edit ${name}`, exact: true }).waitFor();
}

/** The Enabled switch, by keyboard (notifications may cover it). */
async function toggleEnabled() {
  await page.getByRole('switch', { name: 'Enabled' }).focus();
  await page.keyboard.press('Space');
}

type Detail = {
  name: string;
  enabled: boolean;
  steps: { id: string; type: string; name: string | null; config: Record<string, unknown> }[];
  transitions: { fromStepId: string; toStepId: string; branch: string | null }[];
};

async function detail(id: string): Promise<Detail> {
  const res = await owner.sk.get(`/workflows/${id}`);
  assert.equal(res.status, 200, res.text);
  return res.body;
}

/** The graph as `from → to` lines by step name (`Trigger → Welcome`, `Is pro? -yes→ Tips`), sorted. */
function edges(d: Detail): string[] {
  const name = new Map(d.steps.map((s) => [s.id, s.name ?? s.type]));
  return d.transitions.map((t) => `${name.get(t.fromStepId)} ${t.branch ? `-${t.branch}→` : '→'} ${name.get(t.toStepId)}`).sort();
}

test('workflow editor: a welcome series built in the browser runs when its event is tracked', { timeout: 240_000 }, async () => {
  await journey(page, 'workflow-editor-build', async () => {
    await template('Welcome', 'Welcome aboard');
    await template('Pro tips', 'Tips for pro users');
    // A tracked event and a contact field, so the trigger and the condition offer them.
    const seeded = await owner.pk.post('/v1/track', { email: 'seed@people.test', event: 'signed_up', data: { plan: 'free' } });
    assert.equal(seeded.status, 200, seeded.text);
    const withPlan = await owner.sk.post('/contacts', { email: 'seed2@people.test', data: { plan: 'free' } });
    assert.ok(withPlan.status === 200 || withPlan.status === 201, withPlan.text);

    await page.goto(`${base()}/workflows`);
    await page.getByRole('button', { name: 'New workflow' }).click();
    await page.getByRole('dialog').getByLabel('Name').fill('Welcome series');
    await choose('Trigger event', 'signed_up');
    await page.getByRole('button', { name: 'Create workflow' }).click();
    await page.waitForURL(/\/workflows\/[0-9a-f-]+\/edit$/);
    const workflowId = /\/workflows\/([0-9a-f-]+)\/edit$/.exec(page.url())![1];
    assert.equal((await detail(workflowId)).enabled, false, 'a new workflow starts disabled');

    // Enabling an empty workflow is refused, with the API's reason on the page.
    await toggleEnabled();
    await page.getByRole('alert').filter({ hasText: 'the trigger leads to no step' }).waitFor();
    assert.equal((await detail(workflowId)).enabled, false);

    // No template: the form says so itself, without asking the API.
    const writes: string[] = [];
    const onRequest = (r: { method: () => string; url: () => string }) => {
      if (r.method() !== 'GET' && r.url().includes('/workflows/')) writes.push(`${r.method()} ${r.url()}`);
    };
    page.on('request', onRequest);
    await page.getByRole('button', { name: 'Add step after Trigger', exact: true }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Add step', exact: true }).click();
    await page.getByRole('dialog').getByText('Choose a template', { exact: true }).waitFor();
    page.off('request', onRequest);
    assert.deepEqual(writes, []);
    assert.equal(await page.getByRole('dialog').getByText('templateId must be').count(), 0);
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();
    await page.getByRole('dialog').waitFor({ state: 'hidden' });

    await addStep('after Trigger', 'Send email', 'Welcome', () => choose('Template', 'Welcome'));
    await addStep('after Welcome', 'Delay', 'Wait', async () => {
      await page.getByRole('dialog').getByLabel('Wait', { exact: true }).fill('30');
      await choose('Unit', 'minutes');
    });
    await addStep('after Wait', 'Condition', 'Is pro?', async () => {
      await choose('Condition, group 1, filter 1: field', 'data.plan (string)');
      const value = page.getByRole('dialog').getByRole('combobox', { name: 'Condition, group 1, filter 1: value', exact: true });
      await value
        .or(page.getByRole('dialog').getByRole('textbox', { name: 'Condition, group 1, filter 1: value', exact: true }))
        .first()
        .fill('pro');
    });
    await addStep('on the yes branch of Is pro?', 'Send email', 'Tips', () => choose('Template', 'Pro tips'));

    // The condition's branches: Tips on yes, nothing yet on no.
    await page.getByRole('group', { name: 'Yes branch of Is pro?' }).getByText('Tips', { exact: true }).waitFor();
    assert.equal(await page.getByRole('group', { name: 'No branch of Is pro?' }).getByTestId('workflow-step').count(), 0);

    // A step the API refuses (a delay of 400 days) shows the API's message on the field, and nothing is added.
    await page.getByRole('button', { name: 'Add step on the no branch of Is pro?', exact: true }).click();
    await choose('Step type', 'Delay');
    // A typed 0 stays 0 (not clamped to 1 on blur) and gets the API's message.
    await page.getByRole('dialog').getByLabel('Wait', { exact: true }).fill('0');
    await page.keyboard.press('Tab');
    assert.equal(await page.getByRole('dialog').getByLabel('Wait', { exact: true }).inputValue(), '0');
    await page.getByRole('dialog').getByRole('button', { name: 'Add step', exact: true }).click();
    await page.getByRole('dialog').getByText('amount must be at least 1').waitFor();
    await page.getByRole('dialog').getByLabel('Wait', { exact: true }).fill('400');
    await page.getByRole('dialog').getByRole('button', { name: 'Add step', exact: true }).click();
    await page.getByRole('dialog').getByText('a delay can be at most 365 days').waitFor();
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();

    const built = await detail(workflowId);
    assert.deepEqual(edges(built), ['Is pro? -yes→ Tips', 'Trigger → Welcome', 'Wait → Is pro?', 'Welcome → Wait']);
    assert.deepEqual(built.steps.find((s) => s.name === 'Wait')?.config, { amount: 30, unit: 'minutes' });
    assert.deepEqual(built.steps.find((s) => s.name === 'Is pro?')?.config, {
      logic: 'AND',
      groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }],
    });

    await toggleEnabled();
    await waitFor('the workflow enabled', async () => (await detail(workflowId)).enabled);

    // A signup enters ann: the welcome email, then the delay.
    const tracked = await owner.pk.post('/v1/track', { email: 'ann@people.test', event: 'signed_up', data: { plan: 'pro' } });
    assert.equal(tracked.status, 200, tracked.text);
    const received = (subject: string) => sink.messages.filter((m) => m.envelope.to.includes('ann@people.test') && m.parsed.subject === subject);
    await waitFor('the welcome email', async () => received('Welcome aboard').length === 1);
    const waiting = await waitFor('the execution waiting at the delay', async () => {
      const res = await owner.sk.get(`/workflows/${workflowId}/executions?status=WAITING`);
      return res.body.data?.[0];
    });
    assert.equal(waiting.currentStepId, built.steps.find((s) => s.name === 'Wait')!.id);

    clock.advance(31 * MINUTE);
    await waitFor('the tips email', async () => received('Tips for pro users').length === 1, 45_000);
    const done = await waitFor('the execution completed', async () => {
      const res = await owner.sk.get(`/workflows/${workflowId}/executions/${waiting.id}`);
      return res.body.status === 'COMPLETED' ? res.body : null;
    });
    const name = new Map(built.steps.map((s) => [s.id, s.name]));
    assert.deepEqual(
      done.stepExecutions.map((s: { stepId: string; status: string }) => `${name.get(s.stepId)}: ${s.status}`),
      ['Trigger: COMPLETED', 'Welcome: COMPLETED', 'Wait: COMPLETED', 'Is pro?: COMPLETED', 'Tips: COMPLETED'],
    );
  });
});

test('workflow editor: a step inserted between two keeps the chain, and so does removing a middle step', { timeout: 180_000 }, async () => {
  await journey(page, 'workflow-editor-chain', async () => {
    const welcome = await template('Hello', 'Hello');
    const wf = await buildWorkflow(owner.sk, {
      name: 'Chain',
      eventName: 'chained',
      enabled: false,
      steps: [
        { key: 'first', type: 'SEND_EMAIL', config: { templateId: welcome } },
        { key: 'middle', type: 'DELAY', config: { amount: 1, unit: 'hours' } },
        { key: 'last', type: 'SEND_EMAIL', config: { templateId: welcome } },
      ],
      edges: [
        ['trigger', 'first'],
        ['first', 'middle'],
        ['middle', 'last'],
      ],
    });
    for (const [key, name] of [
      ['first', 'First'],
      ['middle', 'Middle'],
      ['last', 'Last'],
    ] as const) {
      const res = await owner.sk.patch(`/workflows/${wf.id}/steps/${wf.steps[key]}`, { name });
      assert.equal(res.status, 200, res.text);
    }
    await page.goto(`${base()}/workflows/${wf.id}`);
    await page.getByRole('link', { name: 'Edit', exact: true }).click();
    await page.getByTestId('workflow-flow').getByText('Middle', { exact: true }).waitFor();

    await addStep('after First', 'Delay', 'Inserted', async () => {
      await page.getByRole('dialog').getByLabel('Wait', { exact: true }).fill('5');
      await choose('Unit', 'minutes');
    });
    assert.deepEqual(edges(await detail(wf.id)), ['First → Inserted', 'Inserted → Middle', 'Middle → Last', 'Trigger → First']);

    // Editing a step changes its config through PATCH.
    await page.getByRole('button', { name: 'Edit Inserted' }).click();
    await page.getByRole('dialog').getByLabel('Wait', { exact: true }).fill('10');
    await page.getByRole('dialog').getByRole('button', { name: 'Save step' }).click();
    await page.getByTestId('workflow-flow').getByText('10 minutes').waitFor();

    // A dirty step form asks before Escape drops what was typed, and so does leaving the page.
    await page.getByRole('button', { name: 'Edit Inserted' }).click();
    const wait = page.getByRole('dialog').getByLabel('Wait', { exact: true });
    await wait.fill('12');
    await page.keyboard.press('Escape');
    const ask = page.getByRole('dialog', { name: "Discard this step's changes?" });
    await ask.getByRole('button', { name: 'Keep editing' }).click();
    await ask.waitFor({ state: 'hidden' });
    assert.equal(await wait.inputValue(), '12', 'Keep editing keeps what was typed');
    await page.evaluate('history.back()');
    await page.getByRole('dialog', { name: 'Discard unsaved changes?' }).getByRole('button', { name: 'Keep editing' }).click();
    assert.match(page.url(), /\/edit$/);
    await wait.focus();
    await page.keyboard.press('Escape');
    await ask.getByRole('button', { name: 'Discard changes' }).click();
    await page.getByRole('dialog', { name: 'Edit Inserted' }).waitFor({ state: 'hidden' });
    await ask.waitFor({ state: 'hidden' });
    assert.equal((await detail(wf.id)).steps.find((s) => s.name === 'Inserted')?.config.amount, 10);
    // A clean form closes at once.
    await page.getByRole('button', { name: 'Edit Inserted' }).click();
    await page.getByRole('dialog').getByLabel('Wait', { exact: true }).waitFor();
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'hidden' });
    // The trigger's form too.
    await page.getByRole('button', { name: 'Edit trigger' }).click();
    await page.getByRole('dialog', { name: 'Name and trigger' }).getByRole('textbox', { name: 'Name' }).fill('Chain renamed');
    await page.keyboard.press('Escape');
    await page.getByRole('dialog', { name: 'Discard the changes to the trigger?' }).getByRole('button', { name: 'Discard changes' }).click();
    await page.getByRole('dialog', { name: 'Name and trigger' }).waitFor({ state: 'hidden' });
    await page.getByRole('dialog').first().waitFor({ state: 'hidden' });
    assert.equal((await detail(wf.id)).name, 'Chain');

    await page.getByRole('button', { name: 'Remove Middle' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Remove step' }).click();
    await page.getByRole('dialog').waitFor({ state: 'hidden' });
    await waitFor(
      'the middle step gone from the page',
      async () => (await page.getByTestId('workflow-flow').getByText('Middle', { exact: true }).count()) === 0,
    );
    const after = await detail(wf.id);
    assert.deepEqual(edges(after), ['First → Inserted', 'Inserted → Last', 'Trigger → First']);
    assert.deepEqual(after.steps.map((s) => s.name).sort(), ['First', 'Inserted', 'Last', 'Trigger']);

    // The chain is whole: it can be enabled.
    await toggleEnabled();
    await waitFor('the workflow enabled', async () => (await detail(wf.id)).enabled);
  });
});

test('workflow editor: two levels of nested branches stay readable at 1280 and 390 wide', { timeout: 180_000 }, async () => {
  await journey(page, 'workflow-editor-nested', async () => {
    const mail = await template('Nested', 'Nested');
    const cond = { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }] };
    const wf = await buildWorkflow(owner.sk, {
      name: 'Nested',
      eventName: 'nested',
      enabled: false,
      steps: [
        { key: 'outer', type: 'CONDITION', config: cond },
        { key: 'inner', type: 'CONDITION', config: cond },
        { key: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName: 'paid', timeout: 90 } },
        { key: 'a', type: 'SEND_EMAIL', config: { templateId: mail } },
        { key: 'b', type: 'SEND_EMAIL', config: { templateId: mail } },
        { key: 'c', type: 'SEND_EMAIL', config: { templateId: mail } },
        { key: 'd', type: 'DELAY', config: { amount: 1, unit: 'days' } },
      ],
      edges: [
        ['trigger', 'outer'],
        ['outer', 'inner', 'yes'],
        ['outer', 'd', 'no'],
        ['inner', 'a', 'yes'],
        ['inner', 'wait', 'no'],
        ['wait', 'b', 'event'],
        ['wait', 'c', 'timeout'],
      ],
    });
    for (const [width, height] of [
      [1280, 900],
      [390, 844],
    ]) {
      await page.setViewportSize({ width, height });
      await page.goto(`${base()}/workflows/${wf.id}/edit`);
      const cards = page.getByTestId('workflow-step');
      await waitFor('the nested flow', async () => (await cards.count()) === 8);
      const widths: number[] = [];
      for (const card of await cards.all()) widths.push(Math.round((await card.boundingBox())!.width));
      assert.ok(
        widths.every((w) => w >= 240),
        `every card at least 240 px wide at ${width}: ${widths.join(', ')}`,
      );
      // The type badges are whole (not cut to a letter).
      for (const badge of await page.getByTestId('workflow-flow').locator('.mantine-Badge-label').all()) {
        assert.ok(await badge.evaluate((el) => el.scrollWidth <= el.clientWidth + 1), `badge "${await badge.textContent()}" fits`);
      }
    }
    await page.setViewportSize({ width: 1280, height: 900 });

    // A timeout of 90 seconds (made through the API) shows as 90 seconds and saves back unchanged.
    await page.getByRole('button', { name: 'Edit Wait for event', exact: true }).click();
    const timeout = page.getByRole('dialog').getByLabel('Give up after (optional)');
    assert.equal(await timeout.inputValue(), '90');
    assert.equal(await page.getByRole('dialog').getByLabel('Timeout unit', { exact: true }).first().inputValue(), 'seconds');
    await page.getByRole('dialog').getByRole('combobox', { name: 'Event to wait for' }).fill('paid_again');
    await page.getByRole('dialog').getByRole('button', { name: 'Save step' }).click();
    await page.getByRole('dialog').waitFor({ state: 'hidden' });
    assert.deepEqual((await detail(wf.id)).steps.find((s) => s.type === 'WAIT_FOR_EVENT')?.config, { eventName: 'paid_again', timeout: 90 });

    // A wait's timeout of 0 is the API's to refuse, with its message on the field.
    await page.getByRole('button', { name: 'Edit Wait for event', exact: true }).click();
    await timeout.fill('0');
    await page.keyboard.press('Tab');
    assert.equal(await timeout.inputValue(), '0');
    await page.getByRole('dialog').getByRole('button', { name: 'Save step' }).click();
    await page.getByRole('dialog').getByText('timeout must be at least 1 second').waitFor();
    assert.equal((await detail(wf.id)).steps.find((s) => s.type === 'WAIT_FOR_EVENT')?.config.timeout, 90);
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();
  });
});
