import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { after, before, describe, test } from 'node:test';
import dns2 from 'dns2';
import { checkDomainsWithStatus } from '../src/modules/domains/jobs.ts';
import { domainsToCheck } from '../src/modules/domains/service.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestDns, startTestDns } from './helpers/dns-server.ts';
import { type DomainRecordEntry, publishRecords } from './helpers/domains.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

type SilentFront = { address: string; silentQueries: () => number; stop: () => Promise<void> };

/** A UDP front for `upstream` that never answers queries for names containing "slow" (a tenant's DNS that does not answer). */
async function startSilentFront(upstream: string): Promise<SilentFront> {
  const [upstreamHost, upstreamPort] = upstream.split(':');
  const sock = dgram.createSocket('udp4');
  let silent = 0;
  sock.on('message', (msg, from) => {
    let name = '';
    try {
      name = (dns2.Packet.parse(msg).questions[0]?.name ?? '').toLowerCase();
    } catch {
      // forwarded as is
    }
    if (name.includes('slow')) {
      silent++;
      return;
    }
    const relay = dgram.createSocket('udp4');
    relay.on('message', (reply) => {
      sock.send(reply, from.port, from.address);
      relay.close();
    });
    relay.send(msg, Number(upstreamPort), upstreamHost);
  });
  await new Promise<void>((resolve) => sock.bind(0, '127.0.0.1', () => resolve()));
  return {
    address: `127.0.0.1:${sock.address().port}`,
    silentQueries: () => silent,
    stop: () => new Promise<void>((resolve) => sock.close(() => resolve())),
  };
}

let dns: TestDns;
let front: SilentFront;
let server: TestServer;
let attacker: Bootstrapped;
let victim: Bootstrapped;

before(async () => {
  dns = await startTestDns();
  front = await startSilentFront(dns.address);
  // API only: no cron run of the job interferes with the runs the tests make.
  server = await startTestServer({ DNS_SERVERS: front.address, PROCESS_ROLE: 'api' });
  attacker = await bootstrap(server.api, 'Attacker');
  victim = await bootstrap(server.api, 'Victim');
});
after(async () => {
  await server?.stop();
  await front?.stop();
  await dns?.stop();
});

const SLOW_DOMAINS = 60;

/** Copies of the project's domain `id` named slow<i>.attacker.example (the cap does not apply to direct inserts). */
async function copySlowDomain(id: string, count: number, lastChecked: string): Promise<void> {
  await server.sql(
    `INSERT INTO domains (id, project_id, domain, status, dkim_selector, dkim_public_key, dkim_private_key_enc, records, created_at, last_checked_at)
     SELECT gen_random_uuid(), project_id, 'slow' || g || '.attacker.example', 'pending', dkim_selector, dkim_public_key, dkim_private_key_enc,
            replace(records::text, 'slow0.attacker.example', 'slow' || g || '.attacker.example')::jsonb, created_at, now() - $3::interval
       FROM domains, generate_series(1, $2::int) g WHERE id = $1`,
    [id, count, lastChecked],
  );
}

const lookupsOf = (records: DomainRecordEntry[]) => new Set(records.map((r) => `${r.type} ${r.name.toLowerCase()}`)).size;

describe('the pending domains job', () => {
  let victimId: string;
  let lookupsPerDomain: number;

  test("checks another project's domain early although one project's DNS never answers, asking each silent name once", async () => {
    const v = await victim.sk.post('/domains', { domain: 'victim.example' });
    assert.equal(v.status, 201, v.text);
    victimId = v.body.id;
    publishRecords(dns, v.body.records);
    const slow = await attacker.sk.post('/domains', { domain: 'slow0.attacker.example' });
    assert.equal(slow.status, 201, slow.text);
    lookupsPerDomain = lookupsOf(slow.body.records);
    await server.sql(`UPDATE domains SET last_checked_at = now() - interval '1 hour' WHERE id = $1`, [slow.body.id]);
    await copySlowDomain(slow.body.id, SLOW_DOMAINS - 1, '1 hour');
    // The victim's domain was checked more recently than every one of the attacker's.
    await server.sql(`UPDATE domains SET last_checked_at = now() - interval '1 minute' WHERE id = $1`, [victimId]);

    const silentBefore = front.silentQueries();
    const started = performance.now();
    let victimVerifiedMs = -1;
    let finished = false;
    const run = checkDomainsWithStatus(server.ctx, 'pending').finally(() => (finished = true));
    while (!finished) {
      const [row] = await server.sql<{ status: string }>('SELECT status FROM domains WHERE id = $1', [victimId]);
      if (row.status === 'verified') {
        victimVerifiedMs = performance.now() - started;
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const outcome = await run;
    const runMs = performance.now() - started;
    if (victimVerifiedMs < 0) {
      const [row] = await server.sql<{ status: string }>('SELECT status FROM domains WHERE id = $1', [victimId]);
      assert.equal(row.status, 'verified');
      victimVerifiedMs = runMs;
    }

    // Before: the victim's domain came after all 60 of the attacker's (~12 s), each costing 2 tries.
    assert.ok(victimVerifiedMs < 3000, `the victim's domain was verified after ${Math.round(victimVerifiedMs)} ms`);
    assert.deepEqual(outcome, { checked: SLOW_DOMAINS + 1, selected: SLOW_DOMAINS + 1 });
    assert.equal(front.silentQueries() - silentBefore, SLOW_DOMAINS * lookupsPerDomain);
    // 60 silent domains, 10 at a time, 1 s each (2 s x 2 tries before).
    assert.ok(runMs < 12_000, `the run took ${Math.round(runMs)} ms`);

    const stillPending = await server.sql<{ n: number }>(
      `SELECT count(*)::int AS n FROM domains WHERE project_id = $1 AND status = 'pending' AND last_checked_at > now() - interval '5 minutes'`,
      [attacker.project.id],
    );
    assert.equal(stillPending[0].n, SLOW_DOMAINS); // no answer is no verdict: checked, still pending
  });

  test('stops starting checks when its time is up; the unchecked go first next run', async () => {
    await server.sql(`UPDATE domains SET last_checked_at = now() - interval '1 hour' WHERE project_id = $1`, [attacker.project.id]);
    const started = performance.now();
    const outcome = await checkDomainsWithStatus(server.ctx, 'pending', 1000);
    const runMs = performance.now() - started;
    assert.equal(outcome.selected, SLOW_DOMAINS);
    assert.ok(outcome.checked >= 10 && outcome.checked < SLOW_DOMAINS, `checked ${outcome.checked}`);
    assert.ok(runMs < 1000 + 3000, `the run took ${Math.round(runMs)} ms`);

    const checkedNow = await server.sql<{ n: number }>(
      `SELECT count(*)::int AS n FROM domains WHERE project_id = $1 AND last_checked_at > now() - interval '5 minutes'`,
      [attacker.project.id],
    );
    assert.equal(checkedNow[0].n, outcome.checked);
    const nextRun = await domainsToCheck(server.ctx, 'pending', SLOW_DOMAINS - outcome.checked);
    const beforeThisRun = Date.now() - 50 * 60_000;
    assert.ok(
      nextRun.every((d) => d.lastCheckedAt !== null && d.lastCheckedAt.getTime() < beforeThisRun),
      'next run starts with the domains this one did not reach',
    );
  });
});

describe('domainsToCheck', () => {
  test('takes every project’s least recently checked domain first, then every project’s second, and so on', async () => {
    const projects = await Promise.all(['Many', 'Two', 'One'].map((name) => bootstrap(server.api, name)));
    const [many, two, one] = projects;
    const firstOf = async (p: Bootstrapped, domain: string) => {
      const res = await p.sk.post('/domains', { domain });
      assert.equal(res.status, 201, res.text);
      return res.body.id as string;
    };
    const seed = await firstOf(many, 'm0.order.example');
    // Checked h hours ago, so the order within a turn is known.
    const put = async (projectId: string, domain: string, hoursAgo: number) =>
      server.sql(
        `INSERT INTO domains (id, project_id, domain, status, dkim_selector, dkim_public_key, dkim_private_key_enc, records, created_at, last_checked_at)
         SELECT gen_random_uuid(), $2, $3, 'pending', dkim_selector, dkim_public_key, dkim_private_key_enc, records, created_at, now() - make_interval(hours => $4::int)
           FROM domains WHERE id = $1`,
        [seed, projectId, domain, hoursAgo],
      );
    await server.sql(`UPDATE domains SET last_checked_at = now() - interval '100 hours' WHERE id = $1`, [seed]);
    for (let i = 1; i < 5; i++) await put(many.project.id, `m${i}.order.example`, 100 + i);
    await put(two.project.id, 't0.order.example', 50);
    await put(two.project.id, 't1.order.example', 200);
    await put(one.project.id, 'o0.order.example', 75);

    const mine = new Set(projects.map((p) => p.project.id));
    const order = (await domainsToCheck(server.ctx, 'pending', 5000)).filter((d) => mine.has(d.projectId)).map((d) => d.domain);
    assert.deepEqual(order, [
      // turn 1, least recently checked first
      't1.order.example',
      'm4.order.example',
      'o0.order.example',
      // turn 2
      'm3.order.example',
      't0.order.example',
      // then the rest of the project with many
      'm2.order.example',
      'm1.order.example',
      'm0.order.example',
    ]);
  });
});
