import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { JsonShape, MAX_JSON_DEPTH, MAX_JSON_VALUES } from '../src/http/json-shape.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { stallDuring } from './helpers/event-loop.ts';
import type { Res } from './helpers/http.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/**
 * A JSON body's keys and values are counted as it arrives and refused past 100,000 (or 256
 * levels deep) before JSON.parse builds them: a 55 MB /v1/send body of `{}`s had held the event
 * loop 15 s and taken 3.4 GB.
 */

const count = (...chunks: string[]) => {
  const shape = new JsonShape();
  let bound: string | null = null;
  for (const chunk of chunks) bound ??= shape.push(Buffer.from(chunk));
  return { values: shape.values, depth: shape.depth, bound };
};

describe('JsonShape', () => {
  test('counts each key, string, number, literal, object and array once', () => {
    assert.deepEqual(count('{"a": [1, true, null, "x", -2.5e3], "b": {}}'), { values: 10, depth: 0, bound: null });
    assert.deepEqual(count('12345'), { values: 1, depth: 0, bound: null });
    assert.deepEqual(count('[[[]]]'), { values: 3, depth: 0, bound: null });
  });

  test('brackets, commas and escaped quotes inside strings are not counted', () => {
    assert.deepEqual(count(String.raw`{"a":"[{,\"]}:","b\\":"\\\"{"}`), { values: 5, depth: 0, bound: null });
  });

  test('a text split anywhere, even byte by byte, counts as it does whole', () => {
    const text = String.raw`{"k\\":["\"[", "a\\\\", 12, {"x\\\"y": [true, "]"]}], "z": "\\"}`;
    assert.equal(JSON.stringify(JSON.parse(text)).length, 57); // valid JSON
    const whole = count(text);
    assert.deepEqual(whole, { values: 13, depth: 0, bound: null });
    for (let at = 0; at <= text.length; at++) assert.deepEqual(count(text.slice(0, at), text.slice(at)), whole, `split at ${at}`);
    assert.deepEqual(count(...text), whole);
  });

  test(`${MAX_JSON_VALUES.toLocaleString('en-US')} values pass; one more is past the bound`, () => {
    const zeros = (n: number) => `[${'0,'.repeat(n - 2)}0]`; // the array is a value too
    assert.deepEqual(count(zeros(MAX_JSON_VALUES)), { values: MAX_JSON_VALUES, depth: 0, bound: null });
    assert.equal(count(zeros(MAX_JSON_VALUES + 1)).bound, 'values');
  });

  test(`${MAX_JSON_DEPTH} levels pass; one more is past the bound`, () => {
    const nest = (n: number) => '['.repeat(n) + ']'.repeat(n);
    assert.equal(count(nest(MAX_JSON_DEPTH)).bound, null);
    assert.equal(count(nest(MAX_JSON_DEPTH + 1)).bound, 'depth');
  });
});

let server: TestServer;
let b: Bootstrapped;
before(async () => {
  server = await startTestServer();
  b = await bootstrap(server.api);
});
after(async () => server?.stop());

const MB = 1024 * 1024;
const sendBody = (data: string) => `{"to":"shape@example.com","from":"a@sandbox.herald.test","subject":"s","body":"b","data":{"x":${data}}}`;

function assertTooLarge(res: Res, details: Record<string, number>, message: string): void {
  assert.equal(res.status, 413, res.text.slice(0, 300));
  assert.equal(res.body.error.code, 'PAYLOAD_TOO_LARGE');
  assert.equal(res.body.error.message, message);
  assert.deepEqual(res.body.error.details, details);
}

describe('a JSON body past the bounds', () => {
  test('POST /v1/send of 55 MB of `{}`: 413 without parsing it, and no email or contact', async () => {
    const raw = Buffer.from(sendBody(`[${'{},'.repeat(Math.floor((55 * MB) / 3))}{}]`));
    const { result: res, stallMs } = await stallDuring(() => b.sk.request('POST', '/v1/send', { raw, headers: { 'content-type': 'application/json' } }));
    assertTooLarge(res, { maxValues: 100_000 }, 'Request body has more than 100,000 JSON keys and values');
    // The old code held the loop 15 s here; counting is a few ms a chunk.
    assert.ok(stallMs < 250, `event loop held ${Math.round(stallMs)} ms`);
    const emails = await b.sk.get('/emails');
    assert.deepEqual(emails.body.data, []);
    const contacts = await b.sk.get('/contacts');
    assert.deepEqual(contacts.body.data, []);
  });

  test('a body streamed without a length is counted as it arrives', async () => {
    const chunk = new TextEncoder().encode('0,'.repeat(32 * 1024));
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"emails":['));
      },
      pull(controller) {
        sent++;
        if (sent > 100)
          controller.close(); // 6.4 MB, far past the bound: the server stops reading first
        else controller.enqueue(chunk);
      },
    });
    const res = await fetch(`${server.url}/contacts/lookup`, {
      method: 'POST',
      headers: { authorization: `Bearer ${b.project.secretKey}`, 'content-type': 'application/json' },
      body,
      duplex: 'half',
    } as RequestInit);
    const parsed = (await res.json()) as { error: { code: string; details: unknown } };
    assert.equal(res.status, 413);
    assert.equal(parsed.error.code, 'PAYLOAD_TOO_LARGE');
    assert.deepEqual(parsed.error.details, { maxValues: 100_000 });
  });

  test('the sign-in routes, open to anyone, take 16 KB: POST /auth/login of 17 KB is 413, not a login attempt', async () => {
    const login = (padding: number) =>
      server.api.request('POST', '/auth/login', {
        raw: `{"email":"nobody@example.com","password":"wrong-password","x":"${'a'.repeat(padding)}"}`,
        headers: { 'content-type': 'application/json' },
      });
    const big = await login(17 * 1024);
    assert.equal(big.status, 413);
    assert.equal(big.body.error.code, 'PAYLOAD_TOO_LARGE');
    assert.equal(big.body.error.message, 'Request body is too large');
    const small = await login(15 * 1024);
    assert.equal(small.status, 401);
    assert.equal(small.body.error.message, 'Invalid email or password');
  });

  test('nesting past 256 levels is 413, in a small body too; contact data keeps its own 64-level 422', async () => {
    const nested = (n: number) => '['.repeat(n) + ']'.repeat(n);
    const deep = await b.pk.request('POST', '/v1/track', {
      raw: `{"email":"deep@example.com","event":"e","data":{"x":${nested(MAX_JSON_DEPTH)}}}`,
      headers: { 'content-type': 'application/json' },
    });
    assertTooLarge(deep, { maxDepth: 256 }, 'Request body nests JSON more than 256 levels deep');
    const data = await b.pk.request('POST', '/v1/track', {
      raw: `{"email":"deep@example.com","event":"e","data":{"x":${nested(70)}}}`,
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(data.status, 422);
    assert.equal(data.body.error.errors[0].message, 'data must not nest deeper than 64 levels');
  });

  test('within the bound a large body is parsed and validated as before', async () => {
    const raw = `{"emails":[${'1,'.repeat(MAX_JSON_VALUES - 4)}1]}`; // the object, the key and the array are 3 of them
    assert.ok(raw.length > 64 * 1024);
    const res = await b.sk.request('POST', '/contacts/lookup', { raw, headers: { 'content-type': 'application/json' } });
    assert.equal(res.status, 422);
    assert.deepEqual(res.body.error.errors[0], { field: 'emails', code: 'too_big', message: 'At most 500 emails per lookup' });
  });
});
