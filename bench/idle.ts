import { type ChildProcess, spawn } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../src/db/embedded.ts';
import { nodeFlagsFor } from '../src/start-flags.ts';
import { bootstrap } from '../test/helpers/bootstrap.ts';
import { removeDataDir } from '../test/helpers/data-dir.ts';
import { type Api, createApi } from '../test/helpers/http.ts';
import { fmt, importCsv, mallocSettings, printMachine, prepareMallocTrim, startCompileCache, verdict } from './lib.ts';

/**
 * `npm run bench -- idle [--emails=N] [--campaign] [--quiet-seconds=S]`: the memory of one idle
 * Herald process as `npm start` runs it (API and worker together, embedded PostgreSQL excluded: it
 * is its own processes) 15 s and 45 s after start-up, at its peak while it delivers N emails
 * (capture mode, sandbox sender: through /v1/send, 50 recipients a request, or with --campaign as
 * one campaign to N contacts imported from a CSV file), and S seconds after the last one.
 * Reference: a bare Node process with the same flags, idle, in the same run. Target (issue 15):
 * under 150 MB after start-up and after a 100,000-email campaign has finished.
 */

const ROOT = path.resolve(import.meta.dirname, '..');
// As in `npm start`; PROBE=<file> adds `--import <file>` (e.g. a script printing process.memoryUsage()).
const NODE_FLAGS = [...nodeFlagsFor('all'), ...(process.env.PROBE ? ['--import', process.env.PROBE] : [])];
const TARGET_MB = 150;
/** The rest after start-up that RSS and CPU are read over. */
const REST_SECONDS = 30;
const COMPILE_CACHE = startCompileCache(ROOT);

const status = (pid: number, field: 'VmRSS' | 'VmHWM') =>
  Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024;

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await Promise.race([exited, sleep(20_000).then(() => child.kill('SIGKILL'))]);
}

const TICKS_PER_SECOND = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
/** /proc/<pid>/stat's fields after the command's closing parenthesis (field 3 on), as numbers. */
const statFields = (pid: number): number[] => {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return text
    .slice(text.lastIndexOf(')') + 2)
    .split(' ')
    .map(Number);
};
/** CPU seconds a process has used (utime + stime). */
const cpuSeconds = (pid: number): number => {
  const f = statFields(pid);
  return (f[11] + f[12]) / TICKS_PER_SECOND;
};
/**
 * CPU seconds PostgreSQL's processes have used: the postmaster, its live children, and the
 * children it has reaped (cutime + cstime), so a backend that ends between two readings still counts.
 */
function postgresCpuSeconds(dataDir: string): number {
  const postmaster = Number(readFileSync(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]);
  const own = statFields(postmaster);
  let ticks = own[11] + own[12] + own[13] + own[14];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const f = statFields(Number(entry));
      if (f[1] === postmaster) ticks += f[11] + f[12];
    } catch {
      // The process ended while the list was read.
    }
  }
  return ticks / TICKS_PER_SECOND;
}

async function bareNode(restSeconds: number): Promise<{ rss: number; cpuPerCent: number }> {
  const child = spawn(process.execPath, [...NODE_FLAGS, '-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  await sleep(3000);
  const rss = status(child.pid!, 'VmRSS');
  const cpu = cpuSeconds(child.pid!);
  await sleep(restSeconds * 1000);
  const cpuPerCent = ((cpuSeconds(child.pid!) - cpu) / restSeconds) * 100;
  child.kill('SIGKILL');
  return { rss, cpuPerCent };
}

const FROM = 'bench@sandbox.herald.test';
const SUBJECT = 'Hello {{email}}';
const BODY = '<p>Hello <a href="https://example.com/x">there</a></p>';

async function sendInRequests(sk: Api, emails: number): Promise<void> {
  for (let i = 0; i < emails; i += 50) {
    const to = Array.from({ length: Math.min(50, emails - i) }, (_, j) => `r${i + j}@bench.example.com`);
    const res = await sk.post('/v1/send', { to, from: FROM, subject: SUBJECT, body: BODY });
    if (res.status !== 200) throw new Error(`send answered ${res.status}: ${res.text}`);
  }
}

/** N contacts imported from a CSV file, then one campaign to all of them, sent now. */
async function sendCampaign(sk: Api, emails: number): Promise<void> {
  await importCsv(sk, ['email', ...Array.from({ length: emails }, (_, i) => `r${i}@bench.example.com`)].join('\n'), 250);
  const created = await sk.post('/campaigns', { name: 'Idle bench', subject: SUBJECT, body: BODY, from: FROM });
  if (created.status !== 201) throw new Error(`campaign answered ${created.status}: ${created.text}`);
  if (created.body.data.totalRecipients !== emails) throw new Error(`the audience is ${created.body.data.totalRecipients}`);
  const sent = await sk.post(`/campaigns/${created.body.data.id}/send`, {});
  if (sent.status !== 200) throw new Error(`send answered ${sent.status}: ${sent.text}`);
  for (;;) {
    const campaign = await sk.get(`/campaigns/${created.body.data.id}`);
    if (campaign.status !== 200) throw new Error(`the campaign's read answered ${campaign.status}: ${campaign.text}`);
    if (campaign.body.status === 'SENT') return;
    await sleep(500);
  }
}

export async function run(args: string[]): Promise<void> {
  const opt = (name: string, dflt: number) => Number(args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? dflt);
  const emails = opt('emails', 2000);
  const quietSeconds = opt('quiet-seconds', 70);
  const asCampaign = args.includes('--campaign');
  printMachine(
    `bench idle: RSS of \`npm start\` (API + worker, PostgreSQL excluded), ${fmt(emails)} emails delivered in between${asCampaign ? ' as one campaign' : ''}`,
  );
  prepareMallocTrim();

  const { rss: bare, cpuPerCent: bareCpu } = await bareNode(REST_SECONDS);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'herald-bench-idle-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const startHerald = async (): Promise<{ herald: ChildProcess; rss: number }> => {
    const herald = spawn(process.execPath, [...NODE_FLAGS, 'src/main.ts'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        DATA_DIR: dataDir,
        PORT: String(port),
        LOG_LEVEL: 'warn',
        LOG_FORMAT: 'json',
        SEND_RATE_PER_SECOND: '100000',
        // 100,000 emails through /v1/send are 2,000 requests, past the default 1,000 a minute.
        API_RATE_LIMIT_PER_MINUTE: '10000000',
        NODE_COMPILE_CACHE: COMPILE_CACHE,
        ...mallocSettings(), // bench/README.md § idle
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    for (let i = 0; ; i++) {
      if ((await fetch(`${base}/health`).catch(() => null))?.ok) break;
      if (i > 600 || herald.exitCode !== null) throw new Error('Herald did not start');
      await sleep(100);
    }
    await sleep(15_000); // start-up work settles (migrations, first queue polls)
    return { herald, rss: status(herald.pid!, 'VmRSS') };
  };
  // The first start after a change fills the compile cache, as `npm start` does; the second is measured.
  const first = await startHerald();
  await stop(first.herald);
  const { herald, rss: afterStart } = await startHerald();
  // V8's memory reducer waits 8 s after start-up's last full GC, then for a quiet moment. The CPU
  // both Herald and its PostgreSQL use meanwhile, with nothing to do, is what a laptop pays at rest.
  const cpuBefore = { herald: cpuSeconds(herald.pid!), postgres: postgresCpuSeconds(dataDir) };
  await sleep(REST_SECONDS * 1000);
  const restCpu = {
    herald: ((cpuSeconds(herald.pid!) - cpuBefore.herald) / REST_SECONDS) * 100,
    postgres: ((postgresCpuSeconds(dataDir) - cpuBefore.postgres) / REST_SECONDS) * 100,
  };
  const atRest = status(herald.pid!, 'VmRSS');
  try {
    const { sk } = await bootstrap(createApi(base), 'Idle bench');
    const started = performance.now();
    if (asCampaign) await sendCampaign(sk, emails);
    else await sendInRequests(sk, emails);
    for (;;) {
      const waiting = await Promise.all(['QUEUED', 'SENDING'].map((state) => sk.get(`/emails?status=${state}&limit=1`)));
      if (waiting.every((w) => w.body.data.length === 0)) break;
      await sleep(250);
    }
    const seconds = (performance.now() - started) / 1000;
    const peak = status(herald.pid!, 'VmHWM');
    await sleep(quietSeconds * 1000);
    const afterWork = status(herald.pid!, 'VmRSS');

    const row = (what: string, mb: number, target: boolean) =>
      console.log(`| ${what} | ${mb.toFixed(0)} MB | ${(mb / bare).toFixed(2)}× | ${target ? verdict(mb < TARGET_MB) : '—'} |`);
    console.log(
      `delivered ${fmt(emails)} emails in ${seconds.toFixed(1)} s (${fmt(emails / seconds)}/s, capture mode${asCampaign ? ', the import of the contacts included' : ''})`,
    );
    console.log('| Process | RSS | × bare Node | Target < 150 MB |');
    console.log('|---|---|---|---|');
    row('bare Node, idle (reference)', bare, false);
    row('Herald after its first start (compile cache filled)', first.rss, false);
    row('Herald 15 s after start-up', afterStart, true);
    row('Herald 45 s after start-up', atRest, true);
    row(`Herald peak while delivering`, peak, false);
    row(`Herald ${quietSeconds} s after the last email`, afterWork, true);
    console.log(`\nCPU at rest (15 s to 45 s after start-up, ${REST_SECONDS} s), in % of one core:`);
    console.log('| Process | CPU |');
    console.log('|---|---|');
    console.log(`| bare Node, idle (reference) | ${bareCpu.toFixed(2)} % |`);
    console.log(`| Herald | ${restCpu.herald.toFixed(2)} % |`);
    console.log(`| its PostgreSQL (embedded) | ${restCpu.postgres.toFixed(2)} % |`);
  } finally {
    await stop(herald);
    await removeDataDir(dataDir);
  }
}
