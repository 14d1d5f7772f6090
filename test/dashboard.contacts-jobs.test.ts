import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import type { Bootstrapped } from './helpers/bootstrap.ts';
import { BROWSER_SETUP_TIMEOUT_MS, journey } from './helpers/browser.ts';
import { openDashboard } from './helpers/dashboard.ts';
import type { TestServer } from './helpers/server.ts';

/** The contacts page's background jobs in a real headless Chromium: CSV import and bulk actions on selected rows. */

let server: TestServer;
let stop = async () => {};
let page: Page;
let owner: Bootstrapped;

before(
  async () => {
    ({ server, owner, page, stop } = await openDashboard('Contact jobs'));
  },
  { timeout: BROWSER_SETUP_TIMEOUT_MS },
);

after(() => stop());

const base = () => `${server.url}/app/p/${owner.project.id}`;

test('contacts: a CSV import runs with a progress bar and ends with its errors table', { timeout: 180_000 }, async () => {
  await journey(page, 'contacts-import', async () => {
    const rows = ['email,plan,score'];
    for (let i = 0; i < 1500; i++) rows.push(`person${i}@example.org,${i % 3 === 0 ? 'pro' : 'free'},${i}`);
    rows.push('not-an-address,free,1', ',pro,2');
    const csv = rows.join('\n') + '\n';

    await page.goto(`${base()}/contacts`);
    await page.getByText('No contacts yet').waitFor();
    await page.getByRole('button', { name: 'Import CSV' }).click();
    const dialog = page.getByRole('dialog', { name: 'Import contacts from CSV' });
    await dialog.locator('input[type=file]').setInputFiles({ name: 'people.csv', mimeType: 'text/csv', buffer: Buffer.from(csv) });
    // Every poll of the job, as the page saw it.
    const polls: { status: string; processedRows: number; totalRows: number }[] = [];
    page.on('response', (r) => {
      if (/\/contacts\/import\/imp_/.test(r.url()))
        void r.json().then(
          (j) => polls.push(j),
          () => undefined,
        );
    });
    const uploaded = page.waitForResponse((r) => r.url().endsWith('/contacts/import') && r.request().method() === 'POST');
    await dialog.getByRole('button', { name: 'Import', exact: true }).click();
    const { jobId } = (await (await uploaded).json()) as { jobId: string };
    assert.match(jobId, /^imp_/);

    await dialog.getByTestId('import-progress').waitFor();
    await dialog.getByTestId('import-summary').filter({ hasText: 'Imported 1,500 new, updated 0, skipped 2.' }).waitFor();
    assert.equal(await dialog.getByTestId('import-progress-label').innerText(), '1,502 of 1,502 rows');
    // The page polled until the job settled, and the rows it reported never went backwards.
    for (let i = 0; i < 50 && !polls.some((p) => p.status === 'completed'); i++) await new Promise((r) => setTimeout(r, 100));
    await new Promise((r) => setTimeout(r, 1500)); // longer than the poll interval: no poll follows the completed one
    assert.equal(polls.filter((p) => p.status === 'completed').length, 1, 'polling stops once the job is completed');
    const processed = polls.map((p) => p.processedRows);
    assert.deepEqual(
      processed,
      [...processed].sort((a, b) => a - b),
    );

    const job = await owner.sk.get(`/contacts/import/${jobId}`);
    assert.equal(job.body.status, 'completed');
    assert.equal(job.body.imported, 1500);
    assert.equal(job.body.errors.length, 2);
    const shown = await dialog.getByTestId('import-errors').getByRole('row').allInnerTexts();
    assert.equal(shown.length, 3); // header + 2
    // Each reason in words, not the API's code.
    const readable: Record<string, string> = { invalid_email: 'Not a valid email address', missing_email: 'No email address' };
    assert.deepEqual(
      (job.body.errors as { reason: string }[]).map((e) => e.reason),
      ['invalid_email', 'missing_email'],
    );
    for (const [i, e] of (job.body.errors as { row: number; email: string; reason: string }[]).entries()) {
      const cells = await dialog
        .getByTestId('import-errors')
        .getByRole('row')
        .nth(i + 1)
        .getByRole('cell')
        .allInnerTexts();
      assert.deepEqual(cells, [String(e.row), e.email || '—', readable[e.reason]]);
    }

    await dialog.getByRole('button', { name: 'Done' }).click();
    await page.getByText('1,500 contacts').waitFor();
    const contact = await owner.sk.get('/contacts?search=person3%40example.org');
    assert.deepEqual(contact.body.data[0].data, { plan: 'pro', score: 3 });
  });
});

test('contacts: selected rows are unsubscribed, subscribed and deleted in bulk, with a confirmation for delete', { timeout: 180_000 }, async () => {
  await journey(page, 'contacts-bulk', async () => {
    const ids: Record<string, string> = {};
    for (const email of ['bulk1@example.org', 'bulk2@example.org', 'bulk3@example.org']) {
      const made = await owner.sk.post('/contacts', { email });
      assert.ok(made.status === 200 || made.status === 201, made.text);
      ids[email] = made.body.id;
    }
    await page.goto(`${base()}/contacts?search=bulk`);
    await page.getByText('3 contacts').waitFor();
    const emails = () => page.getByRole('table').getByRole('link').allInnerTexts();
    await page.getByRole('link', { name: 'bulk3@example.org' }).waitFor();
    assert.deepEqual(await emails(), ['bulk3@example.org', 'bulk2@example.org', 'bulk1@example.org']); // newest first
    await page
      .getByRole('textbox', { name: 'Sort' })
      .or(page.getByRole('combobox', { name: 'Sort' }))
      .first()
      .click();
    await page.getByRole('option', { name: 'Email A–Z' }).click();
    await page.waitForURL(/order=email/);
    for (let i = 0; i < 50 && (await emails())[0] !== 'bulk1@example.org'; i++) await page.waitForTimeout(100);
    assert.deepEqual(await emails(), ['bulk1@example.org', 'bulk2@example.org', 'bulk3@example.org']);

    await page.getByRole('checkbox', { name: 'Select bulk1@example.org' }).check();
    await page.getByRole('checkbox', { name: 'Select bulk2@example.org' }).check();
    await page.getByTestId('bulk-bar').getByText('2 selected').waitFor();
    await page.getByRole('button', { name: 'Unsubscribe', exact: true }).click();
    await page.getByText('2 contacts unsubscribed').waitFor();
    await page.getByTestId('bulk-bar').waitFor({ state: 'detached' });
    for (const [email, subscribed] of [
      ['bulk1@example.org', false],
      ['bulk2@example.org', false],
      ['bulk3@example.org', true],
    ] as const) {
      assert.equal((await owner.sk.get(`/contacts/${ids[email]}`)).body.subscribed, subscribed, email);
    }

    await page.getByRole('checkbox', { name: 'Select all contacts on this page' }).check();
    await page.getByTestId('bulk-bar').getByText('3 selected').waitFor();
    await page.getByRole('button', { name: 'Subscribe', exact: true }).click();
    await page.getByText('2 contacts subscribed (1 unchanged)').waitFor();
    for (const email of Object.keys(ids)) assert.equal((await owner.sk.get(`/contacts/${ids[email]}`)).body.subscribed, true, email);

    await page.getByRole('checkbox', { name: 'Select bulk3@example.org' }).check();
    await page.getByRole('button', { name: 'Delete…' }).click();
    const confirm = page.getByRole('dialog', { name: 'Delete 1 contact?' });
    await confirm.getByRole('button', { name: 'Cancel' }).click();
    assert.equal((await owner.sk.get(`/contacts/${ids['bulk3@example.org']}`)).status, 200);
    await page.getByRole('button', { name: 'Delete…' }).click();
    await confirm.getByRole('button', { name: 'Delete 1 contact' }).click();
    await page.getByText('1 contact deleted').waitFor();
    await page.getByRole('link', { name: 'bulk3@example.org' }).waitFor({ state: 'detached' });
    assert.equal((await owner.sk.get(`/contacts/${ids['bulk3@example.org']}`)).status, 404);
    assert.equal((await owner.sk.get(`/contacts/${ids['bulk1@example.org']}`)).status, 200);

    // The sidebar's link opens every contact again, without the search or the selection.
    await page.getByRole('checkbox', { name: 'Select bulk1@example.org' }).check();
    await page.getByTestId('bulk-bar').getByText('1 selected').waitFor();
    assert.equal((await owner.sk.post('/contacts', { email: 'other@example.org' })).status, 201);
    await page.getByRole('link', { name: 'Contacts', exact: true }).click();
    await page.getByText(`${((await owner.sk.get('/contacts')).body.total as number).toLocaleString('en-US')} contacts`).waitFor();
    await page.getByRole('link', { name: 'other@example.org' }).waitFor();
    await page.getByTestId('bulk-bar').waitFor({ state: 'detached' });
    await page.waitForTimeout(600); // past the box's 300 ms
    assert.match(page.url(), /\/contacts$/);
    assert.equal(await page.getByRole('textbox', { name: 'Search' }).inputValue(), '');

    // A bulk delete on a later page brings the total down too (it comes with the first page only).
    const before = (await owner.sk.get('/contacts')).body.total as number;
    await page.getByText(`${before.toLocaleString('en-US')} contacts`).waitFor();
    const firstPage = await emails();
    await page.getByRole('button', { name: 'Next' }).click();
    for (let i = 0; i < 100 && (await emails())[0] === firstPage[0]; i++) await page.waitForTimeout(100);
    const [one, two] = await emails();
    assert.ok(!firstPage.includes(one), 'on the second page');
    await page.getByRole('checkbox', { name: `Select ${one}` }).check();
    await page.getByRole('checkbox', { name: `Select ${two}` }).check();
    await page.getByRole('button', { name: 'Delete…' }).click();
    await page.getByRole('dialog', { name: 'Delete 2 contacts?' }).getByRole('button', { name: 'Delete 2 contacts' }).click();
    await page.getByText('2 contacts deleted').waitFor();
    await page.getByText(`${(before - 2).toLocaleString('en-US')} contacts`).waitFor();
    assert.equal((await owner.sk.get('/contacts')).body.total, before - 2);
  });
});
