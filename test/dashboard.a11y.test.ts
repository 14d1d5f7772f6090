import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { bootstrap, type Bootstrapped } from './helpers/bootstrap.ts';
import { BROWSER_SETUP_TIMEOUT_MS, journey, launchBrowser, openPage } from './helpers/browser.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { buildWorkflow } from './helpers/workflows.ts';

/**
 * An accessibility scan (axe-core, WCAG 2 A and AA rules) of the dashboard's main pages, with data
 * in them; a serious or critical violation fails the test and is listed with the elements it hit.
 * axe is evaluated in the page through the DevTools protocol, so the dashboard's CSP stays on.
 */

let server: TestServer;
let browser: Browser;
let owner: Bootstrapped;
let axeSource: string;

before(
  async () => {
    server = await startTestServer();
    owner = await bootstrap(server.api, 'Accessible');
    browser = await launchBrowser();
    axeSource = await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  },
  { timeout: BROWSER_SETUP_TIMEOUT_MS },
);

after(async () => {
  await browser?.close();
  await server?.stop();
});

type Violation = { id: string; impact: string | null; help: string; nodes: { target: unknown[] }[] };

async function scan(page: Page): Promise<string[]> {
  // No hover colours, and no half-finished transitions (a dialog fades in).
  await page.mouse.move(0, 0);
  await page.waitForTimeout(400);
  await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run: (opts: unknown) => Promise<{ violations: Violation[] }> } }).axe;
    const result = await axe.run({ runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
    return result.violations;
  });
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map(
      (v) =>
        `${v.impact} ${v.id} (${v.help}): ${v.nodes
          .slice(0, 5)
          .map((n) => JSON.stringify(n.target))
          .join(', ')}`,
    );
}

async function settle(page: Page, url: string, heading: string | RegExp) {
  await page.goto(url);
  await page.getByRole('heading', { name: heading }).first().waitFor();
  await page
    .getByTestId('loading')
    .first()
    .waitFor({ state: 'detached' })
    .catch(() => undefined);
  await page.waitForLoadState('networkidle');
}

test('accessibility: no serious or critical axe violation on the main pages, at 1280 and 390 px', { timeout: 300_000 }, async () => {
  const contact = await owner.sk.post('/contacts', { email: 'reader@example.org', data: { plan: 'pro', score: 3 } });
  assert.ok(contact.status === 200 || contact.status === 201, contact.text);
  const segment = await owner.sk.post('/segments', {
    name: 'Pros',
    condition: { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }] },
  });
  assert.equal(segment.status, 201, segment.text);
  const template = await owner.sk.post('/templates', { name: 'Welcome', subject: 'Hi', body: '<p>Hello</p>', from: 'hi@sandbox.herald.test' });
  assert.equal(template.status, 201, template.text);
  const sent = await owner.sk.post('/v1/send', { to: 'reader@example.org', from: 'hi@sandbox.herald.test', subject: 'Hi', body: '<p>Hello</p>' });
  assert.equal(sent.status, 200, sent.text);
  // One suppression of each reason, so that the suppressions page shows its badges and the email's link, and the contact's page its notice.
  await server.sql(
    `INSERT INTO suppressions (project_id, email, reason, email_id) VALUES
       ($1, 'reader@example.org', 'bounce', $2), ($1, 'angry@example.org', 'complaint', NULL), ($1, 'by-hand@example.org', 'manual', NULL)`,
    [owner.project.id, sent.body.data.emails[0].email],
  );

  // A workflow with a condition's two branches, for the editor.
  const workflow = await buildWorkflow(owner.sk, {
    eventName: 'signed_up',
    enabled: false,
    steps: [
      { key: 'isPro', type: 'CONDITION', config: { field: 'data.plan', operator: 'equals', value: 'pro' } },
      { key: 'welcome', type: 'SEND_EMAIL', config: { templateId: template.body.id } },
    ],
    edges: [
      ['trigger', 'isPro'],
      ['isPro', 'welcome', 'yes'],
    ],
  });

  const base = `${server.url}/app/p/${owner.project.id}`;
  const pages: [string, string | RegExp][] = [
    [`${base}`, /./],
    [`${base}/contacts`, 'Contacts'],
    [`${base}/contacts/${contact.body.id}`, 'reader@example.org'],
    [`${base}/segments`, 'Segments'],
    [`${base}/segments/${segment.body.id}`, 'Pros'],
    [`${base}/segments/new`, 'New segment'],
    [`${base}/templates`, 'Templates'],
    [`${base}/templates/${template.body.id}`, /./],
    [`${base}/campaigns`, 'Campaigns'],
    [`${base}/campaigns/new`, /./],
    [`${base}/domains`, 'Domains'],
    [`${base}/emails`, 'Emails'],
    [`${base}/emails/${sent.body.data.emails[0].email}`, 'Hi'],
    [`${base}/suppressions`, 'Suppressions'],
    [`${base}/activity`, 'Activity'],
    [`${base}/analytics`, 'Analytics'],
    [`${base}/workflows`, 'Workflows'],
    [`${base}/workflows/${workflow.id}/edit`, /^Edit /],
    [`${base}/settings`, 'Settings'],
    [`${server.url}/app/projects`, /./],
  ];

  const failures: string[] = [];
  // Both widths at once, in two contexts of the one browser: a scan mostly waits for its page to settle.
  const scanAt = async (width: number) => {
    const context = await browser.newContext({ viewport: { width, height: 900 } });
    const page = await openPage(context);
    await journey(page, `a11y-login-${width}`, async () => {
      await settle(page, `${server.url}/app/login`, /log in/i);
      for (const v of await scan(page)) failures.push(`${width}px /login: ${v}`);
    });
    const [name, value] = owner.cookie.split('=');
    await context.addCookies([{ name, value, url: server.url }]);
    for (const [url, heading] of pages) {
      await journey(page, `a11y-${width}-${url.split('/').slice(-1)[0]}`, async () => {
        await settle(page, url, heading);
        for (const v of await scan(page)) failures.push(`${width}px ${url.replace(server.url, '')}: ${v}`);
      });
    }
    // States that open over a page: the import dialog, the bulk bar, a builder with a nested group.
    await journey(page, `a11y-${width}-states`, async () => {
      await settle(page, `${base}/contacts`, 'Contacts');
      await page.getByRole('checkbox', { name: 'Select reader@example.org' }).check();
      await page.getByTestId('bulk-bar').waitFor();
      for (const v of await scan(page)) failures.push(`${width}px contacts with a row selected: ${v}`);
      await page.getByRole('button', { name: 'Import CSV' }).click();
      await page.getByRole('dialog', { name: 'Import contacts from CSV' }).waitFor();
      for (const v of await scan(page)) failures.push(`${width}px import dialog: ${v}`);
      await settle(page, `${base}/segments/${segment.body.id}`, 'Pros');
      await page.getByRole('button', { name: 'Nest groups' }).click();
      await page.getByRole('button', { name: 'Add group' }).click();
      for (const v of await scan(page)) failures.push(`${width}px segment builder with nested groups: ${v}`);
      const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
      assert.ok(overflow <= 0, `the segment builder overflows by ${overflow}px at ${width}px`);
    });
    await context.close();
  };
  await Promise.all([scanAt(1280), scanAt(390)]);
  assert.deepEqual(failures.sort(), []);
});
