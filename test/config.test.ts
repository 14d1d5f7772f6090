import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { ConfigError, envSchema, loadConfig, maskUrlPassword } from '../src/config.ts';
import { heavyReadTime } from '../src/http/heavy-reads.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const dataDirs: string[] = [];
const base = () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'herald-config-'));
  dataDirs.push(dir);
  return { DATA_DIR: dir, JWT_SECRET: 'x'.repeat(32) };
};
after(() => {
  for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
});

function configError(env: Record<string, string>): string {
  try {
    loadConfig({ ...base(), ...env });
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.message;
  }
  assert.fail('expected a ConfigError');
}

describe('configuration errors never print secrets', () => {
  test('a URL with a password is shown with the password masked', () => {
    assert.equal(
      configError({ SMTP_URL: 'http://mailer:hunter2secret@smtp.example.com:587' }),
      'Invalid configuration: SMTP_URL must be a URL with scheme smtp:// or smtps:// (got "http://mailer:***@smtp.example.com:587")',
    );
    const db = configError({ DATABASE_URL: 'mysql://app:s3cr3t-pw@db:3306/herald' });
    assert.doesNotMatch(db, /s3cr3t-pw/);
    assert.match(db, /^Invalid configuration: DATABASE_URL .*"mysql:\/\/app:\*\*\*@db:3306\/herald"/);
  });

  test('an unparseable URL still loses its password', () => {
    const msg = configError({ SMTP_URL: 'smtp//user:p@ss:word@host' });
    assert.doesNotMatch(msg, /p@ss|word/);
    assert.equal(maskUrlPassword('smtp//user:p@ss@host'), 'smtp//user:***@host');
    assert.equal(maskUrlPassword('user:pass@host'), 'user:***@host');
    assert.equal(maskUrlPassword('smtp://user@host:25'), 'smtp://user@host:25');
    assert.equal(maskUrlPassword('smtp://host:25'), 'smtp://host:25');
  });

  test('secret variables are never echoed', () => {
    assert.equal(configError({ JWT_SECRET: 'short-secret' }), 'Invalid configuration: JWT_SECRET must be at least 16 characters');
  });

  test('other values are echoed to help', () => {
    assert.equal(configError({ PORT: 'eighty' }), 'Invalid configuration: PORT must be a whole number (got "eighty")');
  });
});

describe('booleans', () => {
  test('are case-insensitive', () => {
    for (const v of ['TRUE', 'True', 'yes', 'YES', '1']) assert.equal(loadConfig({ ...base(), DISABLE_SIGNUP: v }).disableSignup, true, v);
    for (const v of ['FALSE', 'No', '0']) assert.equal(loadConfig({ ...base(), DISABLE_SIGNUP: v }).disableSignup, false, v);
  });
  test('anything else is refused by name', () => {
    assert.equal(configError({ DISABLE_SIGNUP: 'maybe' }), 'Invalid configuration: DISABLE_SIGNUP must be true or false (got "maybe")');
  });
});

describe('every variable is documented', () => {
  const names = Object.keys(envSchema.shape);
  test('in .env.example, with its default', () => {
    const example = readFileSync(path.join(ROOT, '.env.example'), 'utf8');
    for (const name of names) assert.ok(new RegExp(`^# ${name}=`, 'm').test(example), `${name} is missing from .env.example`);
  });
  test('in the README configuration table', () => {
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    for (const name of names) assert.ok(readme.includes(`| \`${name}\` |`), `${name} is missing from the README's configuration table`);
  });
});

describe('HEAVY_READ_SECONDS_PER_MINUTE', () => {
  test('is 15 by default, 1 to 120, and sets the share of the heavy reads’ time budget', () => {
    assert.equal(loadConfig(base()).heavyReadSecondsPerMinute, 15);
    assert.equal(loadConfig({ ...base(), HEAVY_READ_SECONDS_PER_MINUTE: '120' }).heavyReadSecondsPerMinute, 120);
    assert.deepEqual(heavyReadTime(15), { burstMs: 60_000, sustainedShare: 0.25 });
    assert.deepEqual(heavyReadTime(120), { burstMs: 60_000, sustainedShare: 2 });
    assert.equal(configError({ HEAVY_READ_SECONDS_PER_MINUTE: '0' }), 'Invalid configuration: HEAVY_READ_SECONDS_PER_MINUTE must be at least 1 (got "0")');
  });
});

describe('BILLING_FREE_PLAN_LIMITS', () => {
  test('is 0 for every category by default; named categories take a whole number or unlimited, the others 0', () => {
    assert.deepEqual(loadConfig(base()).billingFreePlanLimits, { transactional: 0, campaigns: 0, workflows: 0, inbound: 0 });
    assert.deepEqual(loadConfig({ ...base(), BILLING_FREE_PLAN_LIMITS: 'transactional=100, campaigns=unlimited,workflows = 7' }).billingFreePlanLimits, {
      transactional: 100,
      campaigns: null,
      workflows: 7,
      inbound: 0,
    });
  });
  test('anything else stops the start with the pair at fault', () => {
    assert.equal(
      configError({ BILLING_FREE_PLAN_LIMITS: 'transactional=100,sms=5' }),
      'Invalid configuration: BILLING_FREE_PLAN_LIMITS must be category=cap pairs separated by commas (categories transactional, campaigns, workflows, inbound, each at most once; cap a whole number up to 1000000000 or unlimited), not "sms=5" (got "transactional=100,sms=5")',
    );
    for (const bad of ['transactional=-1', 'transactional=1.5', 'transactional', 'transactional=1,transactional=2', 'campaigns=lots', 'workflows=2000000000']) {
      assert.match(configError({ BILLING_FREE_PLAN_LIMITS: bad }), /^Invalid configuration: BILLING_FREE_PLAN_LIMITS must be category=cap pairs/, bad);
    }
  });
});
