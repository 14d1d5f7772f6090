import type { Browser, Page } from 'playwright-core';
import { type Bootstrapped, bootstrap } from './bootstrap.ts';
import { launchBrowser, openPage } from './browser.ts';
import { type TestServer, startTestServer } from './server.ts';

export type DashboardSession = { server: TestServer; owner: Bootstrapped; browser: Browser; page: Page; stop: () => Promise<void> };

/**
 * A test server, a signed-up owner with one project, and a headless Chromium page already logged
 * in as that owner (the session cookie set on the browser context), 1280 × 900.
 */
export async function openDashboard(projectName: string, env: Record<string, string> = {}): Promise<DashboardSession> {
  const server = await startTestServer(env);
  const owner = await bootstrap(server.api, projectName);
  const browser = await launchBrowser();
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const [name, value] = owner.cookie.split('=');
  await context.addCookies([{ name, value, url: server.url }]);
  const page = await openPage(context);
  return {
    server,
    owner,
    browser,
    page,
    stop: async () => {
      await browser.close();
      await server.stop();
    },
  };
}
