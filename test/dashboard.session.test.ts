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

/**
 * Types the template's subject and waits for its live preview: a preview asked after the cookie is
 * cleared would open the dialog before the test's Save (on a loaded machine it did, and its
 * overlay took the click).
 */
async function fillAndPreview(subject: string): Promise<void> {
  const previewed = page.waitForResponse((r) => r.url().endsWith('/templates/preview') && (r.request().postData() ?? '').includes(subject));
  await label(page, 'Subject').fill(subject);
  await previewed;
}

test('an ended session asks to log in again over the template editor; the save goes through and the edit is kept', { timeout: 180_000 }, async () => {
  await journey(page, 'session-template', async () => {
    const id = await template('Receipt');
    const url = `${base()}/templates/${id}`;
    await page.goto(url);
    await fillAndPreview('New subject');
    await page.context().clearCookies();
    await page.getByRole('button', { name: 'Save changes' }).click();
    const dialog = page.getByRole('dialog', { name: 'Your session ended — log in again' });
    await dialog.waitFor();
    assert.equal(page.url(), url, 'the page stays');
    assert.equal(await page.getByText('Missing API key', { exact: false }).count(), 0);
    assert.equal(await label(dialog, 'Email').inputValue(), ownerEmail, 'the address is filled in');
    await logInAgain(ownerEmail);
    await page.getByText('Template saved').waitFor();
    assert.equal(page.url(), url);
    assert.equal(await label(page, 'Subject').inputValue(), 'New subject');
    assert.equal((await owner.sk.get(`/templates/${id}`)).body.subject, 'New subject');
  });
});

test("an ended session met by the segment editor's live count keeps the page; the count follows the login", { timeout: 180_000 }, async () => {
  await journey(page, 'session-segment', async () => {
    await page.goto(`${base()}/segments/new`);
    await label(page, 'Name').fill('Unsaved segment');
    await page.getByTestId('live-count').waitFor();
    await page.context().clearCookies();
    // The live count asks again when the tree changes: a background request that meets the 401.
    await page.getByRole('button', { name: 'Add filter' }).first().click();
    await page.getByRole('dialog', { name: 'Your session ended — log in again' }).waitFor();
    assert.match(page.url(), /\/segments\/new$/);
    await logInAgain(ownerEmail);
    assert.equal(await label(page, 'Name').inputValue(), 'Unsaved segment');
    await page.getByTestId('live-count').filter({ hasText: /\d/ }).waitFor();
  });
});

test('logging in again as another account leaves the page for the projects page; dismissing goes to the login page', { timeout: 180_000 }, async () => {
  await journey(page, 'session-other', async () => {
    const other = await bootstrap(server.api, 'Other');
    const otherEmail: string = (await server.api.get('/users/@me', { cookie: other.cookie })).body.email;
    const id = await template('Welcome');
    await page.goto(`${base()}/templates/${id}`);
    await fillAndPreview('Not for the other account');
    await page.context().clearCookies();
    await page.getByRole('button', { name: 'Save changes' }).click();
    await logInAgain(otherEmail);
    await page.waitForURL(`${server.url}/app/projects`);
    await page.getByText('Other').first().waitFor();
    assert.equal(await page.getByText('Session', { exact: true }).count(), 0, "the first account's project is not listed");
    assert.equal((await owner.sk.get(`/templates/${id}`)).body.subject, 'Old subject');

    // Back to the owner; an ended session, dismissed on a page without changes: the login page.
    await page.context().clearCookies();
    const [name, value] = owner.cookie.split('=');
    await page.context().addCookies([{ name, value, url: server.url }]);
    await page.goto(`${base()}/templates`);
    await page.getByRole('link', { name: 'Welcome' }).waitFor();
    await page.context().clearCookies();
    await page.getByRole('link', { name: 'Contacts' }).click();
    await page.getByRole('dialog', { name: 'Your session ended — log in again' }).getByRole('button', { name: 'Go to the login page' }).click();
    await page.getByRole('heading', { name: 'Log in to Herald' }).waitFor();
    assert.match(page.url(), /\/app\/login\?next=%2Fp%2F[^&]+%2Fcontacts$/);
  });
});

test('unsaved changes: leaving a form asks first, a reload too; a save or a create does not', { timeout: 180_000 }, async () => {
  await journey(page, 'unsaved', async () => {
    const id = await template('Guarded');
    await page.goto(`${base()}/templates/${id}`);
    await label(page, 'Subject').fill('Changed');
    const confirm = page.getByRole('dialog', { name: 'Discard unsaved changes?' });

    await page.getByRole('link', { name: '← Templates' }).click();
    await confirm.waitFor();
    await confirm.getByRole('button', { name: 'Keep editing' }).click();
    await confirm.waitFor({ state: 'detached' });
    assert.match(page.url(), new RegExp(`/templates/${id}$`));
    assert.equal(await label(page, 'Subject').inputValue(), 'Changed');

    // A reload asks the browser's own question.
    let asked = '';
    page.once('dialog', (d) => {
      asked = d.type();
      void d.dismiss();
    });
    await page.reload({ timeout: 5_000 }).catch(() => undefined);
    assert.equal(asked, 'beforeunload');
    assert.equal(await label(page, 'Subject').inputValue(), 'Changed');

    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Contacts' }).click();
    await confirm.waitFor();
    await confirm.getByRole('button', { name: 'Discard changes' }).click();
    await page.waitForURL(/\/contacts$/);
    assert.equal((await owner.sk.get(`/templates/${id}`)).body.subject, 'Old subject');

    // Saved, then left: nothing to ask.
    await page.goto(`${base()}/templates/${id}`);
    await label(page, 'Subject').fill('Saved subject');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByText('Template saved').waitFor();
    await page.getByRole('link', { name: '← Templates' }).click();
    await page.waitForURL(/\/templates$/);

    // A create's own redirect to the new item's page: nothing to ask.
    await page.goto(`${base()}/segments/new`);
    await label(page, 'Name').fill('Created segment');
    await page.getByRole('button', { name: 'Create segment' }).click();
    await page.waitForURL(/\/segments\/(?!new)[^/]+$/);
    assert.equal(await confirm.count(), 0);

    // The segment editor, the campaign composer and the project settings ask too.
    for (const [path, field] of [
      [page.url().slice(server.url.length + 4), 'Name'],
      ['/campaigns/new', 'Subject'],
      ['/settings', 'Name'],
    ] as const) {
      await page.goto(path.startsWith('/p/') ? `${server.url}/app${path}` : `${base()}${path}`);
      await label(page, field).first().fill('Edited');
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Home' }).click();
      await confirm.waitFor();
      await confirm.getByRole('button', { name: 'Discard changes' }).click();
      await page.waitForURL(new RegExp(`/p/${owner.project.id}$`));
    }
  });
});

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
