import assert from 'node:assert/strict';
import { mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { signLinkToken } from '../src/render/link-tokens.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { BROWSER_SETUP_TIMEOUT_MS, journey, launchBrowser, openPage } from './helpers/browser.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/**
 * The pages a recipient sees (unsubscribe, manage, subscribe, a link that no longer works), in a
 * real headless Chromium at desktop and phone widths: each fits the screen without sideways
 * scrolling, and its screenshot is saved under docs/screenshots/ (linked from the README).
 */

const SHOTS = path.resolve(import.meta.dirname, '..', 'docs', 'screenshots');
const WIDTHS = { desktop: { width: 1280, height: 720 }, phone: { width: 390, height: 844 } } as const;

let server: TestServer;
let browser: Browser;
let b: Bootstrapped;
let contactId: string;

before(
  async () => {
    server = await startTestServer();
    b = await bootstrap(server.api, 'Acme Newsletter');
    const created = await b.sk.post('/contacts', { email: 'ada@example.com', subscribed: true });
    assert.ok(created.status === 200 || created.status === 201, created.text);
    contactId = created.body.id ?? created.body.data?.id;
    browser = await launchBrowser();
    await mkdir(SHOTS, { recursive: true });
  },
  { timeout: BROWSER_SETUP_TIMEOUT_MS },
);
after(async () => {
  await browser?.close();
  await server?.stop();
});

const token = (action: 'unsubscribe' | 'subscribe' | 'manage', signedAt = Date.now()) =>
  signLinkToken(server.ctx.config.jwtSecret, { projectId: b.project.id, contactId, action }, signedAt);
const SIX_YEARS_AGO = Date.now() - 6 * 365 * 24 * 3600 * 1000;

/** Each page: how to reach it in a fresh tab, and a text it must show. */
const PAGES: { name: string; open: (page: Page) => Promise<unknown>; shows: string }[] = [
  {
    name: 'unsubscribe',
    open: (p) => p.goto(`${server.url}/unsubscribe/${token('unsubscribe')}`),
    shows: 'Stop receiving marketing emails at ada@example.com?',
  },
  {
    name: 'unsubscribed',
    open: async (p) => {
      await p.goto(`${server.url}/unsubscribe/${token('unsubscribe')}`);
      await p.getByRole('button', { name: 'Unsubscribe' }).click();
      await p.getByText('ada@example.com has been unsubscribed.').waitFor();
    },
    shows: 'ada@example.com has been unsubscribed.',
  },
  { name: 'subscribe', open: (p) => p.goto(`${server.url}/subscribe/${token('subscribe')}`), shows: 'ada@example.com' },
  { name: 'manage', open: (p) => p.goto(`${server.url}/manage/${token('manage')}`), shows: 'Email preferences' },
  { name: 'expired-link', open: (p) => p.goto(`${server.url}/manage/${token('manage', SIX_YEARS_AGO)}`), shows: 'This link no longer works' },
  {
    name: 'fresh-link-sent',
    open: async (p) => {
      await p.goto(`${server.url}/manage/${token('manage', SIX_YEARS_AGO)}`);
      await p.getByLabel('Email address').fill('ada@example.com');
      await p.getByRole('button', { name: 'Send me a fresh link' }).click();
      await p.getByText('a fresh link is on its way').waitFor();
    },
    shows: 'If this address receives our emails, a fresh link is on its way.',
  },
  { name: 'invalid-link', open: (p) => p.goto(`${server.url}/manage/not-a-link`), shows: 'This link is not valid.' },
];

test('every recipient page at desktop and phone widths, saved under docs/screenshots/', { timeout: 180_000 }, async () => {
  for (const [device, viewport] of Object.entries(WIDTHS)) {
    const context = await browser.newContext({ viewport, deviceScaleFactor: 1 });
    try {
      for (const { name, open, shows } of PAGES) {
        const page = await openPage(context, 30_000);
        await journey(page, `preference-${name}-${device}`, async () => {
          await open(page);
          await page.getByText(shows, { exact: false }).first().waitFor();
          if (name !== 'invalid-link') await page.getByText('Acme Newsletter', { exact: true }).waitFor();
          const width = Number(await page.evaluate('document.documentElement.scrollWidth'));
          assert.ok(width <= viewport.width, `${name} fits ${viewport.width} px (scrollWidth ${width})`);
          const file = path.join(SHOTS, `${name}-${device}.png`);
          await page.screenshot({ path: file, timeout: 15_000 });
          assert.ok((await stat(file)).size > 1000, `${file} was written`);
        });
        await page.close();
      }
    } finally {
      await context.close();
    }
  }
});
