import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { type Browser, type BrowserContext, type Page, chromium } from 'playwright-core';

/**
 * Headless Chromium for the dashboard tests: `CHROMIUM_PATH`, else a system Chromium, else the
 * binary the @sparticuz/chromium package ships (unpacked into the temp dir on first use), so a
 * fresh clone needs no browser download.
 */
const SYSTEM_PATHS = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome', '/usr/bin/google-chrome-stable'];

// Flags from @sparticuz/chromium that would weaken what the tests check (CSP, same-origin) are dropped,
// and so is --single-process (meant for AWS Lambda; here it made screenshots hang).
const UNWANTED = /^--(disable-web-security|allow-running-insecure-content|headless|single-process)/;

async function executable(): Promise<{ path: string; args: string[] }> {
  const fromEnv = process.env.CHROMIUM_PATH;
  if (fromEnv) return { path: fromEnv, args: ['--no-sandbox'] };
  const system = SYSTEM_PATHS.find((p) => existsSync(p));
  if (system) return { path: system, args: ['--no-sandbox'] };
  const { default: packaged } = await import('@sparticuz/chromium');
  return { path: await packaged.executablePath(), args: packaged.args.filter((a) => !UNWANTED.test(a)) };
}

/**
 * One headless Chromium at a time across the suite's test files: on a 2-core machine three
 * browsers plus their servers starve each other into timeouts. A test file takes the lock when it
 * launches its browser and gives it back when it closes it (or exits); the others wait (a lock
 * whose holder died is taken over; after 10 minutes a waiter goes ahead anyway).
 */
const LOCK = path.join(tmpdir(), `herald-test-browser-${process.getuid?.() ?? 'user'}.lock`);

function holderAlive(): boolean {
  try {
    process.kill(Number(readFileSync(path.join(LOCK, 'pid'), 'utf8')), 0);
    return true;
  } catch {
    return false;
  }
}

const LOCK_WAIT_MS = 10 * 60_000;

/**
 * The timeout of a hook (or test) that launches the browser: the lock's wait, then the launch.
 * `npm test` gives a hook 5 minutes, and a file may wait longer than that for its turn.
 */
export const BROWSER_SETUP_TIMEOUT_MS = LOCK_WAIT_MS + 2 * 60_000;

async function takeBrowserLock(): Promise<() => void> {
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      mkdirSync(LOCK);
      writeFileSync(path.join(LOCK, 'pid'), String(process.pid));
      break;
    } catch {
      if (!holderAlive()) rmSync(LOCK, { recursive: true, force: true });
      else if (Date.now() > deadline) return () => {};
      else await new Promise((r) => setTimeout(r, 250));
    }
  }
  const release = () => {
    process.off('exit', release);
    try {
      if (readFileSync(path.join(LOCK, 'pid'), 'utf8') === String(process.pid)) rmSync(LOCK, { recursive: true, force: true });
    } catch {
      // already gone
    }
  };
  process.on('exit', release);
  return release;
}

export async function launchBrowser(): Promise<Browser> {
  const release = await takeBrowserLock();
  try {
    const exe = await executable();
    const browser = await chromium.launch({ executablePath: exe.path, args: exe.args, headless: true, timeout: 60_000 });
    const close = browser.close.bind(browser);
    browser.close = async (...args: Parameters<Browser['close']>) => {
      try {
        await close(...args);
      } finally {
        release();
      }
    };
    return browser;
  } catch (err) {
    release();
    throw err;
  }
}

/**
 * A new page with a patient default timeout (the machine running the suite may be busy). With
 * `HERALD_TEST_CPU_THROTTLE=N` the page's CPU runs N times slower (Chrome DevTools throttling): a
 * test that acts before the page has caught up (fills a field of the page it is leaving) fails
 * here as it would on a loaded CI machine.
 */
export async function openPage(owner: Browser | BrowserContext, timeoutMs = 45_000): Promise<Page> {
  const page = await owner.newPage();
  page.setDefaultTimeout(timeoutMs);
  const rate = Number(process.env.HERALD_TEST_CPU_THROTTLE ?? 1);
  if (rate > 1) await (await page.context().newCDPSession(page)).send('Emulation.setCPUThrottlingRate', { rate });
  return page;
}

export const OUTPUT_DIR = path.resolve(import.meta.dirname, '..', 'output');

/** Saves a screenshot of the viewport as test/output/<name>.png (gitignored); returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  await mkdir(OUTPUT_DIR, { recursive: true });
  const file = path.join(OUTPUT_DIR, `${name.replace(/[^\w.-]+/g, '-')}.png`);
  await page.screenshot({ path: file, timeout: 15_000 }).catch((err: unknown) => console.error(`screenshot failed: ${String(err)}`));
  return file;
}

/** Runs a journey; on failure saves a screenshot of the page before rethrowing. */
export async function journey(page: Page, name: string, fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    const file = await screenshot(page, `${name}-failure`);
    if (err instanceof Error) err.message += `\n(at ${page.url()}; screenshot: ${file})`;
    throw err;
  }
}
