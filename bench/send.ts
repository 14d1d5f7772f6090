import { performance } from 'node:perf_hooks';
import pg from 'pg';
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import { uuidv7 } from '../src/db/ids.ts';
import { decryptPrivateKey } from '../src/modules/domains/dkim-keys.ts';
import { upsertContactQuery } from '../src/modules/contacts/service.ts';
import { preparedQuery } from '../src/db/prepared.ts';
import { startRuntime } from '../src/runtime.ts';
import { bootstrap } from '../test/helpers/bootstrap.ts';
import { startTestDns } from '../test/helpers/dns-server.ts';
import { verifyDomain } from '../test/helpers/domains.ts';
import { dkimResult } from '../test/helpers/smtp-sink.ts';
import { startTestServer } from '../test/helpers/server.ts';
import { cpuMsPer, libraryPipelineRate } from './library-pipeline.ts';
import { halfRateLatency } from './half-rate.ts';
import { autocannon, countingSink, fmt, postgresCpuMs, printMachine, rawPoolRate, verdict, withBenchDatabase } from './lib.ts';

/**
 * Send benchmark.
 *  (a) POST /v1/send accepted requests/s from 64 concurrent clients vs the same writes (contact
 *      upsert, email row, delivery job, one transaction) issued directly through `pg` on 64
 *      connections. Target ≥ 100 % (issue 15: concurrent sends commit together), and p99 < 50 ms
 *      at half the measured rate, evenly paced (`half-rate.ts`; BENCH_STALLS and BENCH_CHECKPOINT
 *      as in `bench track`).
 *  (b) End-to-end delivery of N queued emails into an SMTP sink (render, build, DKIM-sign,
 *      throttle, claim, record) vs a raw nodemailer pool of the same size sending the same
 *      number of prebuilt messages. Target ≥ 70 %.
 */

const CONNECTIONS = 64;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const FROM = 'bench@mail.bench.test';
const BODY =
  '<html><body><h1>Hello {{firstName ?? "there"}}</h1><p>Your order {{order}} has shipped.</p><p><a href="https://example.com/track">Track it</a></p></body></html>';

export async function run(args: string[]): Promise<void> {
  const total = Number(args.find((a) => a.startsWith('--emails='))?.slice(9) ?? 20_000);
  printMachine('Herald send benchmark');
  const dns = await startTestDns();
  try {
    // A database each: (a) leaves thousands of queued emails that (b)'s worker must not deliver.
    const only = args.find((a) => a.startsWith('--only='))?.slice(7); // a or b: one part alone (e.g. under --cpu-prof)
    if (only !== 'b') await withBenchDatabase((databaseUrl) => acceptedThroughput(databaseUrl, dns));
    if (only !== 'a') await withBenchDatabase((databaseUrl) => deliveryThroughput(databaseUrl, dns, total));
  } finally {
    await dns.stop();
  }
}

async function acceptedThroughput(databaseUrl: string, dns: Awaited<ReturnType<typeof startTestDns>>): Promise<void> {
  console.log(`\n(a) POST /v1/send: ${CONNECTIONS} concurrent clients, ${SECONDS} s, one new recipient per request (API process only)`);
  const server = await startTestServer(
    { PROCESS_ROLE: 'api', DATABASE_POOL_SIZE: String(CONNECTIONS), DNS_SERVERS: dns.address, API_RATE_LIMIT_PER_MINUTE: '10000000' },
    { databaseUrl },
  );
  try {
    const b = await bootstrap(server.api, 'bench-send');
    await verifyDomain(b.sk, dns, 'mail.bench.test');
    const body = (id: string) =>
      JSON.stringify({ to: `u${id}@bench.example.com`, from: FROM, subject: 'Order {{order}}', body: BODY, data: { firstName: 'Ada', order: 42 } });
    const cannon = (seconds: number) =>
      autocannon({
        url: `${server.url}/v1/send`,
        method: 'POST',
        connections: CONNECTIONS,
        duration: seconds,
        workers: 1,
        idReplacement: true,
        headers: { authorization: `Bearer ${b.project.secretKey}`, 'content-type': 'application/json' },
        body: body('[<id>]'),
      });
    await cannon(2);
    const before = await countEmails(server.sql, b.project.id);
    const http = await cannon(SECONDS);
    const httpRate = ((await countEmails(server.sql, b.project.id)) - before) / SECONDS;

    const ref = await bootstrap(server.api, 'bench-send-ref');
    const pool = new pg.Pool({ connectionString: databaseUrl, max: CONNECTIONS });
    let n = 0;
    const direct = async (seconds: number) => {
      const until = performance.now() + seconds * 1000;
      let done = 0;
      await Promise.all(
        Array.from({ length: CONNECTIONS }, async () => {
          const client = await pool.connect();
          try {
            while (performance.now() < until) {
              const now = new Date();
              const { query } = upsertContactQuery(
                ref.project.id,
                { email: `r${n++}@bench.example.com`, data: { firstName: 'Ada' } },
                { defaultSubscribed: false, now },
              );
              await client.query('BEGIN');
              const contact = await client.query<{ id: string }>(preparedQuery('contacts_upsert', query));
              const emailId = uuidv7();
              const contentId = uuidv7();
              await client.query(
                `INSERT INTO email_contents (id, project_id, body_source, variables, headers, created_at) VALUES ($1, $2, $3, '{"order":42}', '{}', $4)`,
                [contentId, ref.project.id, BODY, now],
              );
              await client.query(
                `INSERT INTO emails (id, project_id, contact_id, to_email, from_email, type, subject_source, content_id, status, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, 'TRANSACTIONAL', 'Order {{order}}', $6, 'QUEUED', $7, $7)`,
                [emailId, ref.project.id, contact.rows[0].id, `r${n}@bench.example.com`, FROM, contentId, now],
              );
              await client.query(`INSERT INTO pgboss.job (name, data) VALUES ('bench-reference', $1)`, [{ emailId }]);
              await client.query('COMMIT');
              done += 1;
            }
          } finally {
            client.release();
          }
        }),
      );
      return done;
    };
    await server.ctx.jobs.boss.createQueue('bench-reference');
    await direct(2);
    const sqlRate = (await direct(SECONDS)) / SECONDS;
    await pool.end();
    const failed = http.non2xx + http.errors + http.timeouts;
    console.log(`   POST /v1/send (HTTP):   ${fmt(httpRate)} emails/s  (p50 ${http.latency.p50} ms, p99 ${http.latency.p99} ms, ${failed} failed)`);
    console.log(`   same writes through pg: ${fmt(sqlRate)} emails/s`);
    const ratio = httpRate / sqlRate;
    console.log(`   ratio HTTP / SQL:       ${(ratio * 100).toFixed(1)} %  (target ≥ 100 %: ${verdict(ratio >= 1)})`);
    const rate = Math.max(1, Math.floor(httpRate / 2));
    console.log(`   at half that rate, evenly paced: ${fmt(rate)} requests/s`);
    const half = await halfRateLatency(
      {
        url: `${server.url}/v1/send`,
        headers: { authorization: `Bearer ${b.project.secretKey}`, 'content-type': 'application/json' },
        body: body('[<id>]'),
        rate,
        seconds: SECONDS,
        connections: CONNECTIONS,
      },
      { sql: server.sql, databaseUrl, heraldPool: server.ctx.database.pool },
    );
    console.log(
      `   at half that rate (after 1 s of warm-up): p50 ${half.p50} ms, p99 ${half.p99} ms, max ${half.max} ms (${half.failed} failed); p99 < 50 ms: ${verdict(half.p99 < 50)}`,
    );
  } finally {
    await server.stop();
  }
}

async function countEmails(sql: (t: string, v?: unknown[]) => Promise<{ n: number }[]>, projectId: string) {
  return (await sql('SELECT count(*)::int AS n FROM emails WHERE project_id = $1', [projectId]))[0].n;
}

async function deliveryThroughput(databaseUrl: string, dns: Awaited<ReturnType<typeof startTestDns>>, total: number): Promise<void> {
  const sink = await countingSink({ sampleEvery: Math.max(1, Math.floor(total / 10)) });
  const poolSize = 5;
  console.log(`\n(b) delivery of ${fmt(total)} queued emails into an SMTP sink, SMTP pool of ${poolSize}`);
  const env = {
    DNS_SERVERS: dns.address,
    SMTP_URL: sink.url,
    SMTP_POOL_SIZE: String(poolSize),
    SEND_RATE_PER_SECOND: '100000',
    API_RATE_LIMIT_PER_MINUTE: '10000000',
  };
  const api = await startTestServer({ ...env, PROCESS_ROLE: 'api' }, { databaseUrl });
  try {
    const b = await bootstrap(api.api, 'bench-delivery');
    await verifyDomain(b.sk, dns, 'mail.bench.test');
    const t0 = performance.now();
    for (let i = 0; i < total; i += 50) {
      const to = Array.from({ length: Math.min(50, total - i) }, (_, j) => `d${i + j}@bench.example.com`);
      const res = await b.sk.post('/v1/send', { to, from: FROM, subject: 'Order {{order}}', body: BODY, data: { firstName: 'Ada', order: 42 } });
      if (res.status !== 200) throw new Error(res.text);
    }
    console.log(`   queued in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    const config = loadConfig({
      ...env,
      DATABASE_URL: databaseUrl,
      PROCESS_ROLE: 'worker',
      JWT_SECRET: api.ctx.config.jwtSecret,
      LOG_LEVEL: 'silent',
      DATA_DIR: '/tmp/herald-bench-worker',
    });
    let peakRss = process.memoryUsage().rss;
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 200);
    const cpuBefore = process.cpuUsage();
    const mainBefore = process.threadCpuUsage();
    const postgresBefore = postgresCpuMs();
    const start = performance.now();
    const worker = await startRuntime(config, { log: pino({ level: process.env.BENCH_LOG ?? 'silent' }) });
    await sink.until(total);
    const heraldCpu = cpuMsPer(process.cpuUsage(cpuBefore), total);
    const mainCpu = cpuMsPer(process.threadCpuUsage(mainBefore), total);
    const postgresCpu = ((postgresCpuMs() - postgresBefore) / total).toFixed(2);
    const herald = total / ((performance.now() - start) / 1000);
    clearInterval(sampler);
    await worker.stop();
    const statuses = await api.sql<{ status: string; n: number }>(
      `SELECT status, count(*)::int AS n FROM emails WHERE project_id = $1 GROUP BY status ORDER BY status`,
      [b.project.id],
    );
    const sent = statuses.find((s) => s.status === 'SENT')?.n ?? 0;
    if (sent !== total) console.log(`   statuses after the run: ${statuses.map((s) => `${s.status} ${s.n}`).join(', ')}`);
    const dkim = await Promise.all(sink.samples().map((raw) => dkimResult(raw, dns.address)));
    const passed = dkim.filter((d) => d.result === 'pass' && d.domain === 'mail.bench.test').length;

    // Reference: the same number of prebuilt messages through a raw nodemailer pool of the same size.
    const sample = await buildSample();
    sink.reset();
    const rawRate = await rawPoolRate({ url: sink.url, poolSize, total, from: FROM, raw: sample, to: (i) => `d${i}@bench.example.com` });
    // Second reference: the library-only pipeline (render, text part, MIME, DKIM with a parsed key kept, same pool), no database.
    const [domain] = await api.sql<{ key: string }>(`SELECT dkim_private_key_enc AS key FROM domains WHERE project_id = $1`, [b.project.id]);
    sink.reset();
    const library = await libraryPipelineRate({
      url: sink.url,
      poolSize,
      total,
      privateKeyPem: decryptPrivateKey(domain.key, config.jwtSecret),
      domain: 'mail.bench.test',
      from: FROM,
      subject: 'Order {{order}}',
      body: BODY,
      to: (i) => `d${i}@bench.example.com`,
      vars: () => ({ firstName: 'Ada', order: 42 }),
    });
    console.log(`   Herald workers:       ${fmt(herald)} messages/s  (${fmt(sent)} SENT; peak RSS of the bench process ${fmt(peakRss / 2 ** 20)} MiB)`);
    console.log(
      `                         DKIM: ${passed} of ${dkim.length} sampled messages pass${passed === dkim.length ? '' : ` (NOT all: ${dkim.find((d) => d.result !== 'pass')?.why})`}`,
    );
    console.log(
      `                         CPU ${heraldCpu} ms per message in this process (all threads, the sink included), ${mainCpu} ms on the main thread; PostgreSQL ${postgresCpu} ms`,
    );
    console.log(`   raw nodemailer pool:  ${fmt(rawRate)} messages/s  (prebuilt messages)`);
    console.log(`   library pipeline:     ${fmt(library.rate)} messages/s  (liquidjs + html-to-text + MailComposer + mailauth DKIM, one thread, no database)`);
    console.log(`                         CPU ${library.cpuMs} ms per message (the sink included)`);
    const ratio = herald / rawRate;
    console.log(`   ratio Herald / raw:   ${(ratio * 100).toFixed(1)} %  (target ≥ 70 %: ${verdict(ratio >= 0.7)})`);
    const libraryRatio = herald / library.rate;
    console.log(
      `   ratio Herald / library pipeline: ${(libraryRatio * 100).toFixed(1)} %  (target ≥ 90 % and ≥ 750 messages/s: ${verdict(libraryRatio >= 0.9 && herald >= 750)})`,
    );
  } finally {
    await api.stop();
    await sink.stop();
  }
}

/** A message of the same shape and size as the ones Herald sends in (b). */
async function buildSample(): Promise<Buffer> {
  const { buildMessage } = await import('../src/mail/build-message.ts');
  return buildMessage({
    messageId: `<${uuidv7()}@mail.bench.test>`,
    date: new Date(),
    from: { email: FROM },
    to: { email: 'd0@bench.example.com' },
    subject: 'Order 42',
    html: BODY.replace('{{firstName ?? "there"}}', 'Ada').replace('{{order}}', '42'),
    headers: {},
  });
}
