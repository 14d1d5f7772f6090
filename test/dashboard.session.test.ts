import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, beforeEach, test } from 'node:test';
import type { Page } from 'playwright-core';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { BROWSER_SETUP_TIMEOUT_MS, journey } from './helpers/browser.ts';
import { openDashboard } from './helpers/dashboard.ts';
import type { TestServer } from './helpers/server.ts';

/**
 * What the dashboard keeps when the user does not expect to lose it: an ended session asks to log
 * in again over the page, a form with unsaved changes asks before it is left, the contacts list's
 * page is in the URL; and where it goes when there is nothing to show (an unknown id), and the
 * skip link past the navigation.
 */

const PASSWORD = 'correct horse battery'; // bootstrap()'s

let server: TestServer;
let stop = async () => {};
let page: Page;
let owner: Bootstrapped;
let ownerEmail = '';

before(
  async () => {
    ({ server, owner, page, stop } = await openDashboard('Session'));
    ownerEmail = (await server.api.get('/users/@me', { cookie: owner.cookie })).body.email;
  },
  { timeout: BROWSER_SETUP_TIMEOUT_MS },
);

after(() => stop());

// Each test starts signed in as the owner (some end with the cookie cleared or another account's).
beforeEach(async () => {
  await page.context().clearCookies();
  const [name, value] = owner.cookie.split('=');
  await page.context().addCookies([{ name, value, url: server.url }]);
});

const base = () => `${server.url}/app/p/${owner.project.id}`;
const label = (scope: Page | ReturnType<Page['getByRole']>, text: string) => scope.getByLabel(new RegExp(`^${text}( \\*)?$`));

async function template(name: string): Promise<string> {
  const created = await owner.sk.post('/templates', { name, subject: 'Old subject', from: 'hi@sandbox.herald.test', body: '<p>Hi</p>', type: 'TRANSACTIONAL' });
  assert.equal(created.status, 201, created.text);
  return created.body.id;
}

/** The "log in again" dialog, filled and submitted as `email`. */
async function logInAgain(email: string): Promise<void> {
  const dialog = page.getByRole('dialog', { name: 'Your session ended — log in again' });
  await dialog.waitFor();
  await label(dialog, 'Email').fill(email);
  await label(dialog, 'Password').fill(PASSWORD);
  await dialog.getByRole('button', { name: 'Log in' }).click();
  await dialog.waitFor({ state: 'detached' });
}

test("the contacts list's page is in the URL: reload keeps it, Back and Forward move between pages", { timeout: 180_000 }, async () => {
  await journey(page, 'contacts-paging', async () => {
    for (let i = 0; i < 30; i++) {
      const created = await owner.sk.post('/contacts', { email: `paged${String(i).padStart(2, '0')}@example.org` });
      assert.equal(created.status, 201, created.text);
    }
    await page.goto(`${base()}/contacts?order=email`);
    const firstRow = page.locator('tbody tr').first().getByRole('link');
    await firstRow.filter({ hasText: 'paged00@example.org' }).waitFor();
    await page.getByRole('button', { name: 'Next' }).click();
    await firstRow.filter({ hasText: 'paged25@example.org' }).waitFor();
    assert.match(page.url(), /[?&]cursor=/);
    await page.reload();
    await firstRow.filter({ hasText: 'paged25@example.org' }).waitFor();
    await page.goBack();
    await firstRow.filter({ hasText: 'paged00@example.org' }).waitFor();
    assert.match(page.url(), /\/contacts\?order=email$/);
    await page.goForward();
    await firstRow.filter({ hasText: 'paged25@example.org' }).waitFor();
    await page.getByRole('button', { name: 'Previous' }).click();
    await firstRow.filter({ hasText: 'paged00@example.org' }).waitFor();
  });
});

test('an unknown id on a detail page says not found and links back to its list', { timeout: 180_000 }, async () => {
  await journey(page, 'not-found', async () => {
    for (const [list, noun] of [
      ['templates', 'Template'],
      ['campaigns', 'Campaign'],
      ['segments', 'Segment'],
      ['contacts', 'Contact'],
      ['emails', 'Email'],
      ['workflows', 'Workflow'],
    ]) {
      for (const id of ['nope', randomUUID()]) {
        await page.goto(`${base()}/${list}/${id}`);
        await page.getByRole('heading', { name: `${noun} not found` }).waitFor();
        assert.equal(await page.getByRole('button', { name: 'Try again' }).count(), 0, `${list}/${id}`);
        await page.getByRole('link', { name: `Back to ${list}` }).click();
        await page.waitForURL(`${base()}/${list}`);
      }
    }
  });
});

test('the first Tab stop is a skip link that moves focus to the page content', { timeout: 180_000 }, async () => {
  await journey(page, 'skip-link', async () => {
    await page.goto(`${base()}/contacts`);
    await page.getByRole('heading', { name: 'Contacts' }).waitFor();
    await page.keyboard.press('Tab');
    const skip = page.getByRole('link', { name: 'Skip to content' });
    assert.equal(await skip.evaluate((el) => el === (el.ownerDocument as { activeElement: unknown }).activeElement), true);
    const box = await skip.boundingBox();
    assert.ok(box && box.y >= 0 && box.width > 0, 'visible when focused');
    await page.keyboard.press('Enter');
    assert.equal(await page.evaluate<string>('document.activeElement.tagName'), 'MAIN');
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate<string>('document.activeElement.textContent'), 'Import CSV', "the next stop is the page's first button");
  });
});
