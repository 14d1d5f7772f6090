import { type ChildProcess, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mkdtemp, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { uuidv7 } from '../src/db/ids.ts';
import { buildMessage } from '../src/mail/build-message.ts';
import { decryptPrivateKey } from '../src/modules/domains/dkim-keys.ts';
import { nodeFlagsFor } from '../src/start-flags.ts';
import { bootstrap } from '../test/helpers/bootstrap.ts';
import { startTestDns } from '../test/helpers/dns-server.ts';
import { dkimResult } from '../test/helpers/smtp-sink.ts';
import { verifyDomain } from '../test/helpers/domains.ts';
import { startTestServer } from '../test/helpers/server.ts';
import {
  fmt,
  mallocSettings,
  printMachine,
  startCompileCache,
  prepareMallocTrim,
  verdict,
  withBenchDatabase,
  rawPoolRate,
  countingSink,
  postgresCpuMs,
  processCpuMs,
} from './lib.ts';
import { cpuMsPer, libraryPipelineRate } from './library-pipeline.ts';

/**
 * Campaign benchmark (b): one MARKETING campaign to N contacts (default 100,000), delivered by one
 * worker process (render, build, DKIM-sign, track, throttle, claim, record, fan-out) into an SMTP
 * sink that only counts, vs a raw nodemailer pool of the same size (SMTP_POOL_SIZE) sending the
 * same number of prebuilt messages (target ≥ 70 %) and vs target 1's library pipeline composing,
 * signing and sending the campaign's messages (library-pipeline.ts; issue 15's target 2 is target
 * 1's rate: ≥ 90 % of it and ≥ 750 messages/s). Also printed: a DKIM check of sampled messages, the
 * CPU per message of the worker, PostgreSQL and this process, and the worker's peak RSS (VmHWM
 * from /proc; target < 300 MB).
 *
 *   npm run bench -- campaign [--contacts=N] [--pool=5] [--workers=1] [--body=short|newsletter]
 *
 * `--workers=N` runs N worker processes (each with its own pool of `--pool` connections); the raw
 * reference then uses N × pool connections. Peak RSS is the largest worker's.
 */

const FROM = 'news@mail.bench.test';
const SUBJECT = 'Spring news for {{firstName ?? "you"}}';
const SHORT_BODY = `<html><body><h1>Hello {{firstName ?? "there"}}</h1>
<p>Your plan is {{plan}}. Here is what is new this spring.</p>
<p><a href="https://example.com/spring">Read the announcement</a></p></body></html>`;
/** One story of the newsletter body: an image, a heading, a paragraph and a tracked link, styled inline as email HTML is. */
const story = (i: number) => `<tr><td style="padding:24px 32px;font-family:Helvetica,Arial,sans-serif;font-size:16px;line-height:24px;color:#333333">
<img src="https://cdn.example.com/newsletter/2026/spring/image-${i}.png" width="536" alt="Story ${i}" style="display:block;border:0;max-width:100%">
<h2 style="margin:16px 0 8px;font-size:22px;color:#111111">Story ${i}: what changed this month for {{plan}} customers</h2>
<p style="margin:0 0 12px">Lorem ipsum dolor sit amet, consectetur adipiscing elit. Sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat, {{firstName}}.</p>
<p style="margin:0"><a href="https://example.com/blog/2026/spring/story-${i}?utm_source=newsletter&amp;utm_medium=email&amp;utm_campaign=spring" style="color:#0066cc;font-weight:bold">Read story ${i} &rarr;</a></p>
</td></tr>`;
/** `--body=newsletter`: a 36 KB newsletter of 40 stories (40 links, 41 images with the open pixel), the size of real marketing mail. */
const NEWSLETTER_BODY = `<!doctype html><html><head><meta charset="utf-8"><title>Spring</title><style>body{margin:0;padding:0} table{border-collapse:collapse}</style></head><body style="margin:0;background:#f4f4f4">
<table role="presentation" width="100%" cellpadding="0" cellspacing="0"><tr><td align="center"><table role="presentation" width="600" style="background:#ffffff">
<tr><td style="padding:32px"><h1>Hello {{firstName ?? "there"}}</h1></td></tr>
${Array.from({ length: 40 }, (_, i) => story(i + 1)).join('\n')}
</table></td></tr></table></body></html>`;
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const arg = (args: string[], name: string, fallback: number) => {
  const found = args.find((a) => a.startsWith(`--${name}=`));
  const i = args.indexOf(`--${name}`);
  const value = found ? found.slice(name.length + 3) : i >= 0 ? args[i + 1] : undefined;
  return value === undefined ? fallback : Number(value);
};

export async function run(args: string[]): Promise<void> {
  const contacts = arg(args, 'contacts', 100_000);
  const poolSize = arg(args, 'pool', 5);
  const workers = arg(args, 'workers', 1);
  const body = args.includes('--body=newsletter') ? NEWSLETTER_BODY : SHORT_BODY;
  printMachine('Herald campaign benchmark');
  prepareMallocTrim();
  const dns = await startTestDns();
  const sink = await countingSink({ sampleEvery: Math.max(1, Math.floor(contacts / 10)) });
  try {
    await withBenchDatabase(async (databaseUrl) => {
      const herald = await campaignRun(databaseUrl, dns, sink, contacts, poolSize, workers, body);
      const dkim = await Promise.all(sink.samples().map((raw) => dkimResult(raw, dns.address)));
      const passed = dkim.filter((d) => d.result === 'pass' && d.domain === 'mail.bench.test').length;
      sink.reset();
      const raw = await rawRun(sink, contacts, poolSize * workers, body);
      // Target 2's reference: target 1's library pipeline with this campaign's messages, the same pool size.
      sink.reset();
      const library = await libraryPipelineRate({
        url: sink.url,
        poolSize: poolSize * workers,
        total: contacts,
        privateKeyPem: herald.privateKeyPem,
        domain: 'mail.bench.test',
        from: FROM,
        subject: SUBJECT,
        body,
        to: (i) => `user${i + 1}@bench.example.com`,
        vars: (i) => ({ firstName: `User${i + 1}`, plan: (i + 1) % 3 === 0 ? 'pro' : 'free' }),
      });
      console.log(
        `\n   Herald campaign:      ${fmt(herald.rate)} messages/s  (all ${fmt(contacts)} delivered in ${herald.seconds.toFixed(1)} s; SENT after ${herald.sentSeconds.toFixed(1)} s)`,
      );
      console.log(
        `                         DKIM: ${passed} of ${dkim.length} sampled messages pass${passed === dkim.length ? '' : ` (NOT all: ${dkim.find((d) => d.result !== 'pass')?.why})`}`,
      );
      console.log(
        `                         CPU per message: worker process${workers === 1 ? '' : 'es'} ${herald.cpu.worker} ms, PostgreSQL ${herald.cpu.postgres} ms, this process (API and sink) ${herald.cpu.bench} ms`,
      );
      console.log(`                         WAL written: ${fmt(herald.walBytesPerMessage)} bytes a message (from the send to SENT)`);
      console.log(`   raw nodemailer pool:  ${fmt(raw)} messages/s`);
      console.log(
        `   library pipeline:     ${fmt(library.rate)} messages/s  (liquidjs + html-to-text + MailComposer + mailauth DKIM, one thread, no database)`,
      );
      console.log(`                         CPU ${library.cpuMs} ms per message (the sink included)`);
      const ratio = herald.rate / raw;
      console.log(`   ratio Herald / raw:   ${(ratio * 100).toFixed(1)} %  (target ≥ 70 %: ${verdict(ratio >= 0.7)})`);
      const libraryRatio = herald.rate / library.rate;
      console.log(
        `   ratio Herald / library pipeline: ${(libraryRatio * 100).toFixed(1)} %  (target 2, the rate of target 1: ≥ 90 % and ≥ 750 messages/s: ${verdict(libraryRatio >= 0.9 && herald.rate >= 750)})`,
      );
      console.log(`   pool connections:     ${poolSize * workers}`);
      console.log(`   worker peak RSS:      ${fmt(herald.peakRssMiB)} MiB  (VmHWM; target < 300 MB: ${verdict(herald.peakRssMiB * 2 ** 20 < 300e6)})`);
    });
  } finally {
    await sink.stop();
    await dns.stop();
  }
}

type Sink = Awaited<ReturnType<typeof countingSink>>;

async function campaignRun(
  databaseUrl: string,
  dns: Awaited<ReturnType<typeof startTestDns>>,
  sink: Sink,
  contacts: number,
  poolSize: number,
  workerCount: number,
  body: string,
): Promise<{
  rate: number;
  seconds: number;
  sentSeconds: number;
  peakRssMiB: number;
  privateKeyPem: string;
  cpu: { worker: string; postgres: string; bench: string };
  walBytesPerMessage: number;
}> {
  const env = { DNS_SERVERS: dns.address, SMTP_URL: sink.url, SMTP_POOL_SIZE: String(poolSize), SEND_RATE_PER_SECOND: '100000' };
  console.log(
    `\ncampaign of ${fmt(body.length)} characters of body to ${fmt(contacts)} subscribed contacts, SMTP pool of ${poolSize} per worker, SEND_RATE_PER_SECOND=100000, ${workerCount} worker process${workerCount === 1 ? '' : 'es'}`,
  );
  const api = await startTestServer({ ...env, PROCESS_ROLE: 'api', API_RATE_LIMIT_PER_MINUTE: '10000000' }, { databaseUrl });
  const workers: ChildProcess[] = [];
  try {
    const b = await bootstrap(api.api, 'bench-campaign');
    await verifyDomain(b.sk, dns, 'mail.bench.test');
    const t0 = performance.now();
    await api.sql(
      `INSERT INTO contacts (id, project_id, email, subscribed, data, created_at, updated_at)
       SELECT 'cnt_' || lpad(to_hex(g), 32, '0'), $1, 'user' || g || '@bench.example.com', true,
              jsonb_build_object('firstName', 'User' || g, 'plan', CASE WHEN g % 3 = 0 THEN 'pro' ELSE 'free' END),
              timestamptz '2024-01-01' + g * interval '1 second', timestamptz '2024-01-01' + g * interval '1 second'
         FROM generate_series(1, $2::int) AS g`,
      [b.project.id, contacts],
    );
    await api.sql('ANALYZE contacts');
    console.log(`   ${fmt(contacts)} contacts loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const created = await b.sk.post('/campaigns', { name: 'Bench', subject: SUBJECT, body, from: FROM });
    if (created.status !== 201) throw new Error(created.text);
    const campaignId: string = created.body.data.id;
    if (created.body.data.totalRecipients !== contacts) throw new Error(`audience is ${created.body.data.totalRecipients}`);

    // The API's secret: the worker decrypts the domain's DKIM key with it.
    for (let i = 0; i < workerCount; i++) workers.push(await startWorker(databaseUrl, { ...env, JWT_SECRET: api.ctx.config.jwtSecret }));
    let peak = 0;
    const sample = async () => {
      for (const w of workers) peak = Math.max(peak, await vmHwm(w.pid!));
    };
    const sampler = setInterval(() => void sample(), 500);
    const workersCpuMs = () => workers.reduce((sum, w) => sum + processCpuMs(w.pid!), 0);
    const cpuBefore = { worker: workersCpuMs(), postgres: postgresCpuMs(), bench: process.cpuUsage() };
    const [{ lsn }] = await api.sql<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn');
    const start = performance.now();
    const sent = await b.sk.post(`/campaigns/${campaignId}/send`, {});
    if (sent.status !== 200) throw new Error(sent.text);
    let lastReport = start;
    await sink.until(contacts, () => {
      if (performance.now() - lastReport > 10_000) {
        lastReport = performance.now();
        console.log(`   … ${fmt(sink.count())} delivered after ${((lastReport - start) / 1000).toFixed(0)} s`);
      }
    });
    const seconds = (performance.now() - start) / 1000;
    const perMessage = (ms: number) => (ms / contacts).toFixed(2);
    const cpu = {
      worker: perMessage(workersCpuMs() - cpuBefore.worker),
      postgres: perMessage(postgresCpuMs() - cpuBefore.postgres),
      bench: cpuMsPer(process.cpuUsage(cpuBefore.bench), contacts),
    };
    let status = '';
    while (status !== 'SENT') {
      status = (await b.sk.get(`/campaigns/${campaignId}`)).body.status;
      if (status !== 'SENT') await new Promise((r) => setTimeout(r, 200));
    }
    const sentSeconds = (performance.now() - start) / 1000;
    // From the send to SENT: the fan-out, the delivery jobs, the claims, the records, the events.
    const [{ wal }] = await api.sql<{ wal: string }>('SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1)::bigint::text AS wal', [lsn]);
    clearInterval(sampler);
    await sample();
    await new Promise((r) => setTimeout(r, 1000));
    if (sink.count() !== contacts || sink.duplicates().length > 0) {
      const retried = await api.sql(
        `SELECT to_email, status, attempts, error, sent_at FROM emails WHERE campaign_id = $1 AND (attempts > 1 OR error IS NOT NULL) LIMIT 20`,
        [campaignId],
      );
      console.log('   duplicates at the sink:', sink.duplicates().slice(0, 20), '\n   emails with retries or errors:', retried);
      throw new Error(`the sink got ${sink.count()} messages for ${contacts} recipients`);
    }
    const stats = (await b.sk.get(`/campaigns/${campaignId}/stats`)).body;
    if (stats.sentCount !== contacts) throw new Error(`sentCount is ${stats.sentCount}`);
    const [domain] = await api.sql<{ key: string }>(`SELECT dkim_private_key_enc AS key FROM domains WHERE project_id = $1`, [b.project.id]);
    const privateKeyPem = decryptPrivateKey(domain.key, api.ctx.config.jwtSecret);
    return { rate: contacts / seconds, seconds, sentSeconds, peakRssMiB: peak / 1024, privateKeyPem, cpu, walBytesPerMessage: Number(wal) / contacts };
  } finally {
    for (const w of workers) {
      if (w.exitCode !== null) continue;
      w.kill('SIGTERM');
      await new Promise((r) => w.once('exit', r));
    }
    await api.stop();
  }
}

/** `node src/main.ts` as a worker-only process; resolves once it has started its queues. */
async function startWorker(databaseUrl: string, env: Record<string, string>): Promise<ChildProcess> {
  // BENCH_CPU_PROF=<dir> writes a V8 CPU profile of the worker there (on exit).
  // PROBE=<file> adds `--import <file>` (as in bench idle: a script that prints where memory sits).
  const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
  const probe = process.env.PROBE ? ['--import', process.env.PROBE] : [];
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'herald-bench-worker-'));
  const child = spawn(process.execPath, [...nodeFlagsFor('worker'), ...profile, ...probe, 'src/main.ts'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      ...env,
      DATABASE_URL: databaseUrl,
      PROCESS_ROLE: 'worker',
      DATA_DIR: dataDir,
      LOG_LEVEL: 'info',
      NODE_COMPILE_CACHE: startCompileCache(ROOT),
      ...mallocSettings(),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  child.once('exit', () => rmSync(dataDir, { recursive: true, force: true }));
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('Herald worker started')) resolve();
      if (out.length > 100_000) out = out.slice(-10_000);
    });
    child.once('exit', (code) => reject(new Error(`worker exited with ${code}`)));
  });
  child.stdout!.resume();
  return child;
}

/** Peak resident set size of a process in KiB (Linux). */
async function vmHwm(pid: number): Promise<number> {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    return Number(/^VmHWM:\s+(\d+)/m.exec(status)?.[1] ?? 0);
  } catch {
    return 0;
  }
}

async function rawRun(sink: Sink, total: number, poolSize: number, body: string): Promise<number> {
  const sample = await buildMessage({
    messageId: `<${uuidv7()}@mail.bench.test>`,
    date: new Date(),
    from: { email: FROM },
    to: { email: 'user1@bench.example.com' },
    subject: 'Spring news for User1',
    html: body.replaceAll('{{firstName ?? "there"}}', 'User1').replaceAll('{{firstName}}', 'User1').replaceAll('{{plan}}', 'free'),
    headers: {},
  });
  return rawPoolRate({ url: sink.url, poolSize, total, from: FROM, raw: sample, to: (i) => `user${i}@bench.example.com` });
}
