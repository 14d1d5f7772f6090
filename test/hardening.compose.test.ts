import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { dkimVerify } from 'mailauth';
import { after, before, describe, test } from 'node:test';
import type { StoredAttachment } from '../src/db/schema/emails.ts';
import { dkimRecordValue, generateDkimKey } from '../src/modules/domains/dkim-keys.ts';
import { createComposePool } from '../src/render/compose-pool.ts';
import { RenderLimitError } from '../src/render/limits.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { verifyDomain } from './helpers/domains.ts';
import { slowestHealthDuring as healthDuring } from './helpers/health.ts';
import { type MailEnv, startMailEnv, waitForStatus } from './helpers/mail.ts';
import { waitFor } from './helpers/workflows.ts';

/**
 * Issue 14 finding 1: no email can stall the server. Composing runs in a thread with a hard
 * limit, link tracking is linear, and `data` is capped per request; meanwhile /health answers.
 */

let env: MailEnv;
let b: Bootstrapped;
/**
 * The slowest /health answer over a second of doing nothing. On an idle machine /health stays
 * under 100 ms throughout these tests; on a CI box shared with other suites scheduling alone
 * costs hundreds of ms, so a stall is /health slower than the idle baseline plus STALL_MS
 * (default 1 s). The stalls this file guards against were 8 to 12 seconds long.
 */
let idle = 0;
const STALL_MS = Number(process.env.HEALTH_STALL_MS ?? 1000);

before(async () => {
  env = await startMailEnv();
  b = await bootstrap(env.server.api);
  await verifyDomain(b.sk, env.dns, 'mail.example.test');
  const patched = await env.server.api.patch(`/users/@me/projects/${b.project.id}`, { tracking: 'ENABLED' }, { cookie: b.cookie });
  assert.equal(patched.status, 200, patched.text);
  // The first send starts the compose thread; then calibrate the idle baseline.
  const warm = await b.sk.post('/v1/send', { to: 'warm@example.com', from: 'app@mail.example.test', subject: 'Warm', body: 'up' });
  await waitForStatus(b.sk, warm.body.data.emails[0].email, ['SENT']);
  idle = (await slowestHealthDuring(new Promise((r) => setTimeout(r, 1000)))).slowest;
});
after(async () => {
  await env?.stop();
});

const slowestHealthDuring = <T>(work: Promise<T>) => healthDuring(env.server.url, work);

/** Sends one email from the verified domain and waits until it is SENT or FAILED. */
async function sendAndSettle(message: Record<string, unknown>, timeoutMs: number) {
  const res = await b.sk.post('/v1/send', { from: 'app@mail.example.test', ...message });
  assert.equal(res.status, 200, res.text);
  return waitForStatus(b.sk, res.body.data.emails[0].email, ['SENT', 'FAILED'], timeoutMs);
}

describe('one email cannot stall the server', () => {
  test('90 KB of unclosed <a tags is tracked in linear time; /health keeps answering within 100 ms', async () => {
    const { result, slowest } = await slowestHealthDuring(
      sendAndSettle(
        {
          to: 'stall@example.com',
          subject: 'Links',
          body: `<html><body><a href="https://shop.example.com/">shop</a>${'<a '.repeat(30000)}</body></html>`,
        },
        10_000,
      ),
    );
    // SENT proves the linear time: composing runs under a 3 s hard limit, and the quadratic
    // rewrite took 12 s for this body. (Wall time is not asserted: a shared CI box stretches it.)
    assert.equal(result.status, 'SENT', result.error);
    assert.ok(slowest < idle + STALL_MS, `/health kept answering (slowest ${slowest.toFixed(0)} ms, idle ${idle.toFixed(0)} ms)`);
    const msg = env.sink.messages.find((m) => m.envelope.to.includes('stall@example.com'));
    assert.ok(msg);
    assert.match(String(msg.parsed.html), /href="http:\/\/[^"]+\/t\/c\/[A-Za-z0-9_-]+">shop<\/a>/);
  });

  test('a 10 MB one-off data value is refused with 422 at once, and nothing is queued', async () => {
    const raw = JSON.stringify({
      to: 'big@example.com',
      from: 'app@mail.example.test',
      subject: 'Big',
      body: '{% assign a = big | split: "b" %}{{ a | where: "x" | size }}',
      data: { big: { value: 'ab'.repeat(5 * 1024 * 1024), persistent: false } },
    });
    // Parsing 10 MB of JSON is the one thing the server must do on its event loop before it can refuse.
    let parse = performance.now();
    JSON.parse(raw);
    parse = performance.now() - parse;
    const started = performance.now();
    const { result: res, slowest } = await slowestHealthDuring(b.sk.post('/v1/send', undefined, { raw, headers: { 'content-type': 'application/json' } }));
    assert.equal(res.status, 422, res.text);
    assert.equal(res.body.error.code, 'VALIDATION_ERROR');
    assert.equal(res.body.error.errors[0].field, 'data');
    assert.match(res.body.error.errors[0].message, /at most 256 KB/);
    // Receiving and parsing 10 MB costs a few parses' worth of time; rendering it would cost seconds more.
    assert.ok(performance.now() - started < 1000 + STALL_MS + 5 * parse, 'refused at once');
    assert.ok(slowest < idle + parse + STALL_MS, `/health kept answering (slowest ${slowest.toFixed(0)} ms, idle ${idle.toFixed(0)} ms)`);
    const listed = await b.sk.get('/emails?limit=100');
    assert.ok(!listed.body.data.some((e: { to: string }) => e.to === 'big@example.com'));
  });

  test('data with more than 1,000 keys is refused with 422', async () => {
    const data = Object.fromEntries(Array.from({ length: 1001 }, (_, i) => [`k${i}`, i]));
    const res = await b.sk.post('/v1/send', { to: 'keys@example.com', from: 'app@mail.example.test', subject: 's', body: 'b', data });
    assert.equal(res.status, 422, res.text);
    assert.match(res.body.error.errors[0].message, /at most 1000 keys/);
    const track = await b.pk.post('/v1/track', { email: 'keys@example.com', event: 'signup', data });
    assert.equal(track.status, 422, track.text);
  });

  test('a 2 MB body of outputs is refused at once past 10,000 tags and outputs; /health keeps answering', async () => {
    // The body is checked on the API's event loop. Before, the shorthand pre-pass and liquidjs's
    // parse were both quadratic in the outputs: this body would have held the event loop for minutes.
    const body = '{{a}}'.repeat(400_000);
    const { result: res, slowest } = await slowestHealthDuring(
      b.sk.post('/v1/send', { to: 'tags@example.com', from: 'app@mail.example.test', subject: 'Tags', body }),
    );
    assert.equal(res.status, 422, res.text);
    assert.equal(res.body.error.errors[0].field, 'body');
    assert.equal(res.body.error.errors[0].code, 'invalid_template');
    assert.match(res.body.error.errors[0].message, /more than 10000 tags and outputs/);
    assert.ok(slowest < idle + STALL_MS, `/health kept answering (slowest ${slowest.toFixed(0)} ms, idle ${idle.toFixed(0)} ms)`);
    const listed = await b.sk.get('/emails?limit=100');
    assert.ok(!listed.body.data.some((e: { to: string }) => e.to === 'tags@example.com'));
    // The bound counts `{%` tags too, and a template is refused alike when it is saved.
    const saved = await b.sk.post('/templates', { name: 'Tags', subject: 'Tags', body: '{% if a %}{% endif %}'.repeat(5_001), from: 'app@mail.example.test' });
    assert.equal(saved.status, 422, saved.text);
    assert.match(saved.body.error.errors[0].message, /more than 10000 tags and outputs/);
  });

  test('past 64 KB of markup, or 10,000 statements in {% liquid %} tags, a template is refused at once; /health keeps answering', async () => {
    // Each parsed at up to 0.5 µs and 150 bytes of heap a character: a 1.4 MB chain of fallbacks
    // took 680 ms and 200 MB, and 250,000 `{% liquid %}` statements 26 s and 200 MB (its own token
    // list is shifted like the parser's).
    const bodies = {
      fallbacks: `{{ a${' ?? b'.repeat(300_000)} }}`,
      // The first `}}` is inside a string literal: the output, and its filters, go on.
      filtersAfterAString: `{{ "}}"${' | upcase'.repeat(100_000)} }}`,
      // Any whitespace may come before the tag's name.
      statements: `{%-${' '.repeat(40)}liquid\n${'echo a\n'.repeat(250_000)}%}`,
    };
    const { result, slowest } = await slowestHealthDuring(
      Promise.all(
        Object.values(bodies).map((body) => b.sk.post('/v1/send', { to: 'markup@example.com', from: 'app@mail.example.test', subject: 'Big', body })),
      ),
    );
    const messages = result.map((res) => {
      assert.equal(res.status, 422, res.text);
      assert.equal(res.body.error.errors[0].code, 'invalid_template');
      return res.body.error.errors[0].message;
    });
    assert.match(messages[0], /more than 64 KB of characters inside its tags and outputs/);
    assert.match(messages[1], /more than 64 KB of characters inside its tags and outputs/);
    assert.match(messages[2], /more than 10000 tags and outputs/);
    assert.ok(slowest < idle + STALL_MS, `/health kept answering (slowest ${slowest.toFixed(0)} ms, idle ${idle.toFixed(0)} ms)`);
    const listed = await b.sk.get('/emails?limit=100');
    assert.ok(!listed.body.data.some((e: { to: string }) => e.to === 'markup@example.com'));
    // Within the bounds, the same constructs are saved as a template.
    const fine = await b.sk.post('/templates', {
      name: 'Fine',
      subject: 'Fine',
      body: `{{ a${' ?? b'.repeat(1_000)} }}{{ "}}" | upcase }}{% liquid\n${'echo a\n'.repeat(1_000)}%}`,
      from: 'app@mail.example.test',
    });
    assert.equal(fine.status, 201, fine.text);
  });

  test('9,000 outputs spread over 1 MB of braces are checked in linear time and sent; /health keeps answering', async () => {
    // No `{%` tag: the pre-pass searched the rest of the body for one at every output, slowly
    // where braces are frequent (seconds of event loop), and liquidjs's parse moved its whole token
    // array at every token.
    const body = `<p>{{a}}${'<i>{x}</i> '.repeat(10)}</p>\n`.repeat(9_000);
    const { result, slowest } = await slowestHealthDuring(
      sendAndSettle(
        {
          to: 'outputs@example.com',
          subject: 'Outputs',
          body,
          data: { a: { value: 'x', persistent: false } },
        },
        15_000,
      ),
    );
    assert.equal(result.status, 'SENT', result.error);
    assert.ok(slowest < idle + STALL_MS, `/health kept answering (slowest ${slowest.toFixed(0)} ms, idle ${idle.toFixed(0)} ms)`);
  });

  test('a filter chain that runs for seconds fails its one email with a clear error; /health keeps answering', async () => {
    // Within the data caps, but every sort of 30,000 strings runs inside one template node, where
    // the render budget is not checked: the compose thread's hard limit (3 s) stops it on a machine
    // where 400 sorts take that long, and the memory budget (each sort counts its 30,000 strings)
    // on a faster one; either way a clear error. The hard limit alone: the compose pool test below.
    const chain = Array.from({ length: 400 }, () => 'sort | reverse').join(' | ');
    const { result, slowest } = await slowestHealthDuring(
      sendAndSettle(
        {
          to: 'filters@example.com',
          subject: 'Filters',
          body: `{% assign a = big | split: "," %}{{ a | ${chain} | size }}`,
          data: { big: { value: Array.from({ length: 30_000 }, (_, i) => (i * 7919) % 100_003).join(','), persistent: false } },
        },
        15_000,
      ),
    );
    assert.equal(result.status, 'FAILED');
    assert.match(result.error, /took longer than 3000 ms|too much memory/);
    assert.ok(slowest < idle + STALL_MS, `/health kept answering (slowest ${slowest.toFixed(0)} ms, idle ${idle.toFixed(0)} ms)`);
  });
});

describe('the compose threads', () => {
  /** A message whose one filter chain runs far past a 200 ms limit (no render budget is checked inside it). */
  const stalling = () => {
    const chain = Array.from({ length: 300 }, () => 'sort | reverse').join(' | ');
    const big = Array.from({ length: 30_000 }, (_, i) => (i * 7919) % 100_003).join(',');
    return { subject: 's', body: `{% assign a = big | split: "," %}{{ a | ${chain} | size }}`, vars: { big }, footer: null, tracking: null };
  };

  test('a message still composing at the hard limit fails with RenderLimitError, and the next one gets a fresh thread', async () => {
    const pool = createComposePool(1, 200);
    try {
      // Start the thread first: loading the renderer on a loaded machine can take seconds, and it
      // happens before the limit's clock starts.
      assert.equal((await pool.compose({ subject: 'warm', body: 'up', vars: {}, footer: null, tracking: null })).subject, 'warm');
      const started = performance.now();
      await assert.rejects(pool.compose(stalling()), (err: Error) => err instanceof RenderLimitError && /took longer than 200 ms/.test(err.message));
      assert.ok(performance.now() - started < 2_000, 'stopped at the limit, not when the work ended');
      const next = await pool.compose({ subject: 'Hi {{ name }}', body: '<p>Hello {{ name }}</p>', vars: { name: 'Ada' }, footer: null, tracking: null });
      assert.equal(next.subject, 'Hi Ada');
      assert.match(next.html, /Hello Ada/);
    } finally {
      await pool.close();
    }
  });

  test('messages posted to a thread behind one that passes the hard limit are composed by the next thread, in order', async () => {
    const pool = createComposePool(1, 200);
    try {
      assert.equal((await pool.compose({ subject: 'warm', body: 'up', vars: {}, footer: null, tracking: null })).subject, 'warm');
      const before = pool.compose({ subject: 'Before {{ n }}', body: 'b', vars: { n: 0 }, footer: null, tracking: null });
      const stalled = pool.compose(stalling());
      const behind = [1, 2, 3].map((n) => pool.compose({ subject: 'After {{ n }}', body: '<p>{{ n }}</p>', vars: { n }, footer: null, tracking: null }));
      assert.equal((await before).subject, 'Before 0');
      await assert.rejects(stalled, (err: Error) => err instanceof RenderLimitError);
      const after = await Promise.all(behind);
      assert.deepEqual(
        after.map((r) => [r.subject, r.html]),
        [1, 2, 3].map((n) => [`After ${n}`, `<p>${n}</p>`]),
      );
    } finally {
      await pool.close();
    }
  });

  test('work someone waits on (a preview, a check) goes before the queued messages, behind those already posted, in the order asked', async () => {
    const pool = createComposePool(1);
    try {
      assert.equal((await pool.compose({ subject: 'warm', body: 'up', vars: {}, footer: null, tracking: null })).subject, 'warm');
      const finished: string[] = [];
      const queued = Array.from({ length: 40 }, (_, n) =>
        pool.compose({ subject: `queued ${n}`, body: '<p>x</p>'.repeat(2_000), vars: {}, footer: null, tracking: null }).then((r) => finished.push(r.subject)),
      );
      const ahead = pool
        .compose({ subject: 'ahead', body: '<p>preview</p>', vars: {}, footer: null, tracking: null }, { ahead: true })
        .then((r) => finished.push(r.subject));
      const check = pool.check({ body: '{{ a' }).then((errors) => finished.push(`check: ${errors.map((e) => e.message).join()}`));
      await Promise.all([...queued, ahead, check]);
      // Eight were posted to the thread before them (the pipeline), so they finish ninth and tenth, in the order asked.
      assert.equal(finished.indexOf('ahead'), 8, finished.join(', '));
      assert.equal(finished[9], 'check: Invalid template: output "{{ a" not closed, line:1, col:1');
      assert.deepEqual(
        finished.filter((s) => s !== 'ahead' && !s.startsWith('check')),
        Array.from({ length: 40 }, (_, n) => `queued ${n}`),
      );
    } finally {
      await pool.close();
    }
  });

  /** A message from `domain` that the thread builds and signs with `privateKeyPem`. */
  const signed = (domain: string, privateKeyPem: string, subject: string, attachments: StoredAttachment[] = []) => ({
    subject,
    body: '<p>Hello {{ name }}</p>',
    vars: { name: 'Ada' },
    footer: null,
    tracking: null,
    message: { messageId: `<1@${domain}>`, date: new Date(), from: { email: `a@${domain}` }, to: { email: 'b@example.test' }, headers: {}, attachments },
    dkim: { domain, selector: 'herald', privateKeyPem },
  });

  test('a message with a 10 MB attachment gets time for its size beyond the template limit, and is built and signed', async () => {
    const pool = createComposePool(1, 100);
    const key = await generateDkimKey();
    try {
      const content = randomBytes(10 * 2 ** 20 - 1_000).toString('base64');
      const attachment = { filename: 'big.bin', content, contentType: 'application/octet-stream' };
      const composed = await pool.compose(signed('big.example.test', key.privateKeyPem, 'Big', [attachment]));
      // The rendered parts stay in the thread: only the source crosses to the event loop.
      assert.deepEqual(Object.keys(composed).sort(), ['raw', 'subject']);
      const raw = Buffer.from(composed.raw);
      assert.ok(raw.byteLength > content.length, `${raw.byteLength} bytes`);
      assert.equal(raw.subarray(0, 16).toString(), 'DKIM-Signature: ');
    } finally {
      await pool.close();
    }
  });

  test('a compose thread ends after a quiet spell (its memory goes back) and starts again for the next message, which it also signs', async () => {
    const compose = createComposePool(1, 3_000, 300);
    const key = await generateDkimKey();
    /** The subject of the signed source the thread returned, once its DKIM signature verified. */
    const signedSubject = async (subject: string) => {
      const raw = Buffer.from((await compose.compose(signed('idle.example.test', key.privateKeyPem, subject))).raw);
      const verdict = await dkimVerify(raw, {
        resolver: async (name: string) => (name === 'herald._domainkey.idle.example.test' ? [[dkimRecordValue(key.publicKey)]] : []),
      } as unknown as Parameters<typeof dkimVerify>[1]);
      assert.equal((verdict.results[0].status as { result: string }).result, 'pass');
      return /\r\nSubject: (.*)\r\n/.exec(raw.toString())![1];
    };
    try {
      assert.equal(await signedSubject('hi'), 'hi');
      assert.equal(compose.threadCount(), 1);
      await waitFor('the idle compose thread to end', async () => compose.threadCount() === 0, 10_000, 50);
      assert.equal(await signedSubject('again'), 'again', 'a new thread composes and signs the next message');
      assert.equal(compose.threadCount(), 1);
    } finally {
      await compose.close();
    }
  });
});
