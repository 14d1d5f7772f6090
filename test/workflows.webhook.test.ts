import assert from 'node:assert/strict';
import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { advanceBatch } from '../src/modules/workflows/engine/advance.ts';
import { webhookJobSize } from '../src/modules/workflows/engine/webhook-step.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestDns, startTestDns } from './helpers/dns-server.ts';
import { watchProcess } from './helpers/process-watch.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { buildWorkflow, testClock, waitFor } from './helpers/workflows.ts';

/**
 * WEBHOOK steps against a real receiver on loopback: signature verified the way the README tells
 * users to, retries waiting durably on the (moved) clock, one delivery per Idempotency-Key, and
 * the SSRF guard refusing a loopback address when WEBHOOK_ALLOW_PRIVATE_NETWORKS is not set.
 */

type Received = { path: string; headers: http.IncomingHttpHeaders; body: string; signatureOk: boolean };

function startReceiver(secretOf: () => string) {
  const requests: Received[] = [];
  const delivered = new Set<string>();
  const failuresLeft = new Map<string, number>([['/flaky', 2]]);
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      // What a receiver does: check the HMAC of "<t>.<body>" and that t is recent.
      const sig = String(req.headers['x-herald-signature'] ?? '');
      const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(sig);
      const expected = m ? createHmac('sha256', secretOf()).update(`${m[1]}.${body}`).digest() : null;
      const signatureOk = !!m && !!expected && timingSafeEqual(expected, Buffer.from(m[2], 'hex')) && Math.abs(Date.now() / 1000 - Number(m[1])) < 300;
      const path = (req.url ?? '/').split('?')[0];
      requests.push({ path: req.url ?? '/', headers: req.headers, body, signatureOk });
      const left = failuresLeft.get(path) ?? 0;
      if (path === '/always500') {
        res.writeHead(500).end('broken');
      } else if (left > 0) {
        failuresLeft.set(path, left - 1);
        res.writeHead(503, { 'retry-after': '1' }).end('busy');
      } else {
        const key = String(req.headers['idempotency-key']);
        const first = !delivered.has(key);
        delivered.add(key);
        res.writeHead(200, { 'content-type': 'text/plain' }).end(`${first ? 'ok' : 'duplicate'} ${'x'.repeat(3000)}`);
      }
    });
  });
  return new Promise<{ port: number; requests: Received[]; delivered: Set<string>; stop: () => Promise<void> }>((resolve) => {
    server.listen(0, '127.0.0.1', () =>
      resolve({
        port: (server.address() as AddressInfo).port,
        requests,
        delivered,
        stop: () => new Promise((r) => server.close(() => r())),
      }),
    );
  });
}

const SECOND = 1000;

describe('WEBHOOK steps with private networks allowed', () => {
  let server: TestServer;
  let p: Bootstrapped;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  const clock = testClock();

  before(async () => {
    server = await startTestServer({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, { clock });
    p = await bootstrap(server.api, 'Hooks');
    receiver = await startReceiver(() => (p.project as unknown as { webhookSecret: string }).webhookSecret);
  });
  after(async () => {
    await server?.stop();
    await receiver?.stop();
  });

  const execution = async (workflowId: string) =>
    (
      await server.sql<{ id: string; status: string; error: string | null }>('SELECT id, status, error FROM workflow_executions WHERE workflow_id = $1', [
        workflowId,
      ])
    )[0];
  const hookRow = async (executionId: string, stepId: string) =>
    (
      await server.sql<{ id: string; status: string; attempt: number; output: Record<string, unknown>; error: string | null }>(
        'SELECT id, status, attempt, output, error FROM workflow_step_executions WHERE execution_id = $1 AND step_id = $2',
        [executionId, stepId],
      )
    )[0];

  test('a signed webhook is retried after two 503s, waiting durably, and delivered once by its idempotency key', async () => {
    assert.match((p.project as unknown as { webhookSecret: string }).webhookSecret, /.{16,}/, 'the project shows its webhook secret');
    const wf = await buildWorkflow(p.sk, {
      eventName: 'order_paid',
      steps: [
        {
          key: 'hook',
          type: 'WEBHOOK',
          config: {
            url: `http://127.0.0.1:${receiver.port}/flaky?order={{event.orderId}}`,
            headers: { 'X-Order': 'order {{event.orderId}}' },
            body: { order: '{{event.orderId}}', amount: '{{event.amount}}', note: 'Order {{event.orderId}} for {{email}}', plan: '{{event.plan ?? "free"}}' },
          },
        },
        { key: 'mark', type: 'UPDATE_CONTACT', config: { data: { hooked: true } } },
      ],
      edges: [
        ['trigger', 'hook'],
        ['hook', 'mark'],
      ],
    });
    const tracked = await p.pk.post('/v1/track', { email: 'buyer@shop.test', event: 'order_paid', data: { orderId: 'A/1', amount: 42 } });
    assert.equal(tracked.status, 200, tracked.text);

    await waitFor('the first attempt', async () => receiver.requests.length === 1);
    const e = await waitFor('the execution to wait for its retry', async () => {
      const x = await execution(wf.id);
      const row = x && (await hookRow(x.id, wf.steps.hook));
      return row?.attempt === 2 ? x : null;
    });
    assert.equal(e.status, 'WAITING');
    await new Promise((r) => setTimeout(r, 600));
    assert.equal(receiver.requests.length, 1, 'no second attempt before the backoff is over');

    clock.advance(10 * SECOND + 200);
    await waitFor('the second attempt', async () => receiver.requests.length === 2);
    await waitFor('the third attempt to be scheduled', async () => (await hookRow(e.id, wf.steps.hook)).attempt === 3);
    clock.advance(30 * SECOND + 200);
    await waitFor('the third attempt', async () => receiver.requests.length === 3);
    await waitFor('the execution to complete', async () => (await execution(wf.id)).status === 'COMPLETED');

    const row = await hookRow(e.id, wf.steps.hook);
    assert.equal(row.status, 'COMPLETED');
    assert.equal(row.attempt, 3);
    assert.equal(row.output.status, 200);
    assert.equal(String(row.output.body).length, 1024, 'the first 1 KB of the response is kept');
    assert.match(String(row.output.body), /^ok x+$/);

    assert.ok(
      receiver.requests.every((r) => r.signatureOk),
      'every attempt carries a valid signature',
    );
    assert.deepEqual(new Set(receiver.requests.map((r) => r.headers['idempotency-key'])), new Set([row.id]), 'one Idempotency-Key, the step run id');
    assert.equal(receiver.delivered.size, 1, 'one delivery counted by idempotency key');
    const req = receiver.requests[2];
    assert.equal(req.path, '/flaky?order=A%2F1');
    assert.equal(req.headers['x-order'], 'order A/1');
    assert.equal(req.headers['content-type'], 'application/json');
    assert.deepEqual(JSON.parse(req.body), { order: 'A/1', amount: 42, note: 'Order A/1 for buyer@shop.test', plan: 'free' });
    const [contact] = await server.sql<{ data: Record<string, unknown> }>("SELECT data FROM contacts WHERE email = 'buyer@shop.test'");
    assert.equal(contact.data.hooked, true, 'the walk went on after the webhook');
  });

  test('a webhook that keeps failing ends the execution FAILED with the reason after 3 attempts', async () => {
    const wf = await buildWorkflow(p.sk, {
      eventName: 'doomed',
      steps: [{ key: 'hook', type: 'WEBHOOK', config: { url: `http://127.0.0.1:${receiver.port}/always500` } }],
      edges: [['trigger', 'hook']],
    });
    const before = receiver.requests.filter((r) => r.path === '/always500').length;
    await p.pk.post('/v1/track', { email: 'doomed@shop.test', event: 'doomed', data: { n: 1 } });
    const count = () => receiver.requests.filter((r) => r.path === '/always500').length - before;
    await waitFor('attempt 1', async () => count() === 1 && (await execution(wf.id)).status === 'WAITING');
    await waitFor('attempt 2 scheduled', async () => (await hookRow((await execution(wf.id)).id, wf.steps.hook)).attempt === 2);
    clock.advance(10 * SECOND + 200);
    await waitFor('attempt 3 scheduled', async () => count() === 2 && (await hookRow((await execution(wf.id)).id, wf.steps.hook)).attempt === 3);
    clock.advance(30 * SECOND + 200);
    const failed = await waitFor('FAILED', async () => {
      const x = await execution(wf.id);
      return x.status === 'FAILED' ? x : null;
    });
    assert.equal(count(), 3);
    assert.equal(failed.error, 'webhook failed after 3 attempts: HTTP 500');
    const row = await hookRow(failed.id, wf.steps.hook);
    assert.equal(row.status, 'FAILED');
    assert.equal(row.output.status, 500);
    assert.equal(row.output.body, 'broken');
    // The default body (no `body` configured) names the workflow, execution, contact and context.
    const sent = JSON.parse(receiver.requests.filter((r) => r.path === '/always500').at(-1)!.body);
    assert.equal(sent.workflowId, wf.id);
    assert.equal(sent.contact.email, 'doomed@shop.test');
    assert.deepEqual(sent.event, { n: 1 });
  });

  describe('rendering {{variables}} is bounded', () => {
    // The audit's setup: contact data of 250 KB (under the 256 KB request limit) named by many tags.
    const BLOB = 'x'.repeat(250_000);
    const DATA_JSON_LENGTH = JSON.stringify({ blob: BLOB }).length; // 250,011
    /** Far below what the unbounded renderer took (+3.3 GB for these headers, +1.85 GB for this body). */
    const RSS_GROWTH_LIMIT_MB = 50;

    /** Starts one execution of a TRIGGER → WEBHOOK workflow for a contact holding BLOB; waits for the step's first outcome. */
    async function runHook(name: string, config: Record<string, unknown>) {
      const wf = await buildWorkflow(p.sk, { eventName: `render_${name}`, steps: [{ key: 'hook', type: 'WEBHOOK', config }], edges: [['trigger', 'hook']] });
      const contact = await p.sk.post('/contacts', { email: `${name}@render.test`, data: { blob: BLOB } });
      assert.equal(contact.status, 201, contact.text);
      const usage = await measure(async () => {
        const started = await p.sk.post(`/workflows/${wf.id}/executions`, { contactId: contact.body.id });
        assert.equal(started.status, 201, started.text);
        return waitFor(`the ${name} step's first outcome`, async () => {
          const started = await execution(wf.id);
          const row = started && (await hookRow(started.id, wf.steps.hook));
          if (!row || (row.status === 'WAITING' && row.attempt <= 1)) return null;
          // Read again after the step's outcome: the execution read before it may predate its commit.
          return { execution: await execution(wf.id), row };
        });
      });
      return { ...usage.result, rssGrowthMb: usage.rssGrowthMb, stallMs: usage.stallMs };
    }

    /** Peak RSS growth (the server runs in this process) and the longest event-loop stall while `work` runs. */
    async function measure<T>(work: () => Promise<T>): Promise<{ result: T; rssGrowthMb: number; stallMs: number }> {
      const watched = await watchProcess(work);
      return { result: watched.result, rssGrowthMb: Math.round(watched.rssMB), stallMs: Math.round(watched.stallMs) };
    }

    const sentTo = (path: string) => receiver.requests.filter((r) => r.path === path);

    test('50 headers of 124 × {{data}} fail the step with a clear error, without a call and without growing the process', async () => {
      const headers = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`x-h${i}`, '{{data}}'.repeat(124)]));
      const { execution: x, row, rssGrowthMb, stallMs } = await runHook('headers', { url: `http://127.0.0.1:${receiver.port}/big-headers`, headers });
      assert.equal(row.status, 'FAILED');
      assert.equal(row.error, 'webhook failed after 1 attempt: request too large: the rendered header values are over 64 KB');
      assert.deepEqual(row.output, {
        status: null,
        body: '',
        attempts: 1,
        durationMs: 0,
        error: 'request too large: the rendered header values are over 64 KB',
      });
      assert.equal(x.status, 'FAILED');
      assert.equal(x.error, row.error);
      assert.equal(sentTo('/big-headers').length, 0, 'no request was made');
      assert.ok(rssGrowthMb < RSS_GROWTH_LIMIT_MB, `RSS grew by ${rssGrowthMb} MB (event loop stalled up to ${stallMs} ms)`);
    });

    test('a body of 1,787 × {{data}} fails the step at the 1 MB limit, without a call and without growing the process', async () => {
      const body = Array.from({ length: 1787 }, () => '{{data}}');
      const { execution: x, row, rssGrowthMb, stallMs } = await runHook('body', { url: `http://127.0.0.1:${receiver.port}/big-body`, body });
      assert.equal(row.status, 'FAILED');
      assert.equal(row.error, 'webhook failed after 1 attempt: request too large: the rendered body is over 1 MB');
      assert.equal(row.output.error, 'request too large: the rendered body is over 1 MB');
      assert.equal(x.status, 'FAILED');
      assert.equal(sentTo('/big-body').length, 0, 'no request was made');
      assert.ok(rssGrowthMb < RSS_GROWTH_LIMIT_MB, `RSS grew by ${rssGrowthMb} MB (event loop stalled up to ${stallMs} ms)`);
    });

    test('a body under the limit is sent whole: 4 × {{data}} and a string', async () => {
      const body = ['{{data}}', '{{data}}', '{{data}}', '{{data}}', 'for {{email}}'];
      const { execution: x, row } = await runHook('fits', { url: `http://127.0.0.1:${receiver.port}/fits`, headers: { 'X-Id': '{{email}}' }, body });
      assert.equal(row.status, 'COMPLETED', row.error ?? '');
      assert.equal(x.status, 'COMPLETED');
      const [sent] = sentTo('/fits');
      const tail = JSON.stringify('for fits@render.test');
      assert.equal(sent.body.length, 1 + 4 * (DATA_JSON_LENGTH + 1) + tail.length + 1, 'just under 1 MB');
      assert.equal(sent.body.length, 1_000_072);
      assert.ok(sent.body.startsWith(`[{"blob":"xxxxxxxx`));
      assert.ok(sent.body.endsWith(`"},${tail}]`));
      assert.deepEqual(JSON.parse(sent.body), [{ blob: BLOB }, { blob: BLOB }, { blob: BLOB }, { blob: BLOB }, 'for fits@render.test']);
      assert.equal(sent.headers['x-id'], 'fits@render.test');
      assert.ok(sent.signatureOk, 'the body as sent is the body signed');
    });
  });
});

describe('WEBHOOK steps without WEBHOOK_ALLOW_PRIVATE_NETWORKS', () => {
  let dns: TestDns;
  let server: TestServer;
  let p: Bootstrapped;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  before(async () => {
    dns = await startTestDns();
    server = await startTestServer({ DNS_SERVERS: dns.address });
    p = await bootstrap(server.api, 'Guarded');
    receiver = await startReceiver(() => '');
  });
  after(async () => {
    await server?.stop();
    await receiver?.stop();
    await dns?.stop();
  });

  test('a host that resolves to loopback is refused on the resolved address: no request, FAILED with the reason', async () => {
    dns.set('hooks.example.test', 'A', ['127.0.0.1']);
    const literal = await p.sk.post('/workflows', { name: 'literal', eventName: 'x' });
    const refusedAtConfig = await p.sk.post(`/workflows/${literal.body.id}/steps`, {
      type: 'WEBHOOK',
      config: { url: `http://127.0.0.1:${receiver.port}/hook` },
    });
    assert.equal(refusedAtConfig.status, 400, 'a literal loopback URL is refused when the step is saved');

    const wf = await buildWorkflow(p.sk, {
      eventName: 'ping',
      steps: [{ key: 'hook', type: 'WEBHOOK', config: { url: `http://hooks.example.test:${receiver.port}/hook` } }],
      edges: [['trigger', 'hook']],
    });
    await p.pk.post('/v1/track', { email: 'guard@shop.test', event: 'ping' });
    const failed = await waitFor('FAILED', async () => {
      const [x] = await server.sql<{ status: string; error: string | null }>('SELECT status, error FROM workflow_executions WHERE workflow_id = $1', [wf.id]);
      return x?.status === 'FAILED' ? x : null;
    });
    assert.match(failed.error ?? '', /refused: hooks\.example\.test resolves to a private or reserved address \(127\.0\.0\.1\)/);
    assert.equal(receiver.requests.length, 0, 'nothing reached the loopback receiver');
  });
});

describe('webhook requests waiting for their call are bounded in size', () => {
  let server: TestServer;
  let p: Bootstrapped;

  const clock = testClock();

  before(async () => {
    // No runner here: the test advances the batches itself.
    server = await startTestServer({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', PROCESS_ROLE: 'api' }, { clock });
    p = await bootstrap(server.api, 'Room');
  });
  after(async () => server?.stop());

  test('a batch prepares webhook requests until its room is used up; the others wait a second, unleased, for a later batch', async () => {
    const wf = await buildWorkflow(p.sk, {
      eventName: 'room',
      steps: [{ key: 'hook', type: 'WEBHOOK', config: { url: 'http://127.0.0.1:9/hook', body: { blob: '{{data.blob}}' } } }],
      edges: [['trigger', 'hook']],
    });
    for (const n of [1, 2, 3]) {
      const contact = await p.sk.post('/contacts', { email: `room${n}@hooks.test`, data: { blob: 'x'.repeat(200_000) } });
      assert.equal(contact.status, 201, contact.text);
      const started = await p.sk.post(`/workflows/${wf.id}/executions`, { contactId: contact.body.id });
      assert.equal(started.status, 201, started.text);
    }
    const waiting = async () =>
      server.sql<{ leased: boolean }>("SELECT lease_until IS NOT NULL AS leased FROM workflow_executions WHERE workflow_id = $1 AND status = 'WAITING'", [
        wf.id,
      ]);
    // The first batch walks each execution to its webhook step.
    await advanceBatch(server.ctx, { batchSize: 10 });
    assert.equal((await waiting()).length, 3);
    // Room for 300,000 characters: the first request (about 200,000) leaves room, the second passes it.
    const first = await advanceBatch(server.ctx, { batchSize: 10, webhookRoom: 300_000 });
    assert.equal(first.webhooks.length, 2);
    assert.ok(first.webhooks.every((job) => webhookJobSize(job) > 200_000 && webhookJobSize(job) < 201_000));
    assert.deepEqual((await waiting()).map((x) => x.leased).sort(), [false, true, true]);
    // Not claimed again at once (it would fill every batch while it waits for room)...
    assert.equal((await advanceBatch(server.ctx, { batchSize: 10, webhookRoom: 300_000 })).claimed, 0);
    // ...but a second later.
    clock.advance(1_000);
    const second = await advanceBatch(server.ctx, { batchSize: 10, webhookRoom: 300_000 });
    assert.equal(second.webhooks.length, 1);
    assert.deepEqual(
      (await waiting()).map((x) => x.leased),
      [true, true, true],
    );
  });
});
