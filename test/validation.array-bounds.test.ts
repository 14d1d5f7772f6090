import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { z } from 'zod';
import { MAX_FIELD_ERRORS, fieldErrors, validationError } from '../src/http/errors.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { stallDuring } from './helpers/event-loop.ts';
import type { Res } from './helpers/http.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/**
 * A body of bad array items within the body limits: the array's length is checked before its
 * items (src/http/bounded-array.ts), and one answer lists at most MAX_FIELD_ERRORS field errors.
 * zod had checked all 500,000 items of a `.max(50)` array, one issue each: a 12-28 s stall and a
 * 500 (stack overflow in a union) on /v1/send, a 56 MB answer from /contacts/lookup. A body now
 * holds at most 100,000 JSON keys and values (test/http.json-shape.test.ts), so these send 90,000.
 */

let server: TestServer;
let b: Bootstrapped;
before(async () => {
  server = await startTestServer();
  b = await bootstrap(server.api);
});
after(async () => server?.stop());

/** A raw JSON body: `n` copies of `item` in an array, spliced into `wrap`. */
const flood = (n: number, item: string, wrap: (array: string) => string) => wrap(`[${Array(n).fill(item).join(',')}]`);

const post = (path: string, raw: string, method = 'POST') =>
  stallDuring(() => b.sk.request(method, path, { raw, headers: { 'content-type': 'application/json' } }));

// The old code's stalls were seconds; JSON.parse of these bodies is a few ms.
const MAX_STALL_MS = 250;
const MAX_ANSWER_BYTES = 20_000;

type Listed = { field: string; code: string; message: string; received?: string };

/** A small 422 (and, given `stallMs`, a short stall); its field errors. */
function assertBounded(res: Res, stallMs?: number): Listed[] {
  assert.equal(res.status, 422, res.text.slice(0, 300));
  assert.equal(res.body.error.code, 'VALIDATION_ERROR');
  assert.equal(res.body.error.message, 'Request validation failed');
  assert.ok(res.text.length < MAX_ANSWER_BYTES, `answer is ${res.text.length} bytes`);
  if (stallMs !== undefined) assert.ok(stallMs < MAX_STALL_MS, `event loop held ${Math.round(stallMs)} ms`);
  return res.body.error.errors;
}

describe('a body of 90,000 bad array items', () => {
  test('POST /v1/send with 90,000 ints in `to`: 422 naming the limit and the first 50 items, quickly', async () => {
    const raw = flood(90_000, '1', (to) => `{"to":${to},"from":"a@sandbox.herald.test","subject":"s","body":"b"}`);
    const { result: res, stallMs } = await post('/v1/send', raw);
    const errors = assertBounded(res, stallMs);
    assert.deepEqual(errors[0], { field: 'to', code: 'too_big', message: 'Array must contain at most 50 element(s)' });
    assert.equal(errors.length, 51);
    assert.deepEqual(errors[50], { field: 'to.49', code: 'invalid_union', message: 'Invalid input' });
    assert.equal(res.body.error.details, undefined);
  });

  test('POST /v1/send with 90,000 bad strings in `to`: 422, not 500', async () => {
    const raw = flood(90_000, '"x"', (to) => `{"to":${to},"from":"a@sandbox.herald.test","subject":"s","body":"b"}`);
    const { result: res, stallMs } = await post('/v1/send', raw);
    const errors = assertBounded(res, stallMs);
    assert.deepEqual(errors.slice(0, 2), [
      { field: 'to', code: 'too_big', message: 'Array must contain at most 50 element(s)' },
      { field: 'to.0', code: 'invalid_string', message: 'Invalid email' },
    ]);
    assert.equal(errors.length, 51);
  });

  test('POST /v1/send with 45,000 bad custom headers: one too_big error', async () => {
    const headers = `{${Array.from({ length: 45_000 }, (_, i) => `"h${i}":1`).join(',')}}`;
    const raw = `{"to":"a@b.co","from":"a@sandbox.herald.test","subject":"s","body":"b","headers":${headers}}`;
    const { result: res, stallMs } = await post('/v1/send', raw);
    const errors = assertBounded(res, stallMs);
    assert.deepEqual(errors, [{ field: 'headers', code: 'too_big', message: 'At most 100 custom headers' }]);
  });

  test('POST /contacts/lookup with 90,000 ints: the first 100 field errors and `details` saying more were cut', async () => {
    const { result: res, stallMs } = await post(
      '/contacts/lookup',
      flood(90_000, '1', (emails) => `{"emails":${emails}}`),
    );
    const errors = assertBounded(res, stallMs);
    assert.equal(errors.length, MAX_FIELD_ERRORS);
    assert.equal(MAX_FIELD_ERRORS, 100);
    assert.deepEqual(errors[0], { field: 'emails', code: 'too_big', message: 'At most 500 emails per lookup' });
    assert.deepEqual(errors[1], { field: 'emails.0', code: 'invalid_type', message: 'Expected string, received number', received: 'number' });
    assert.equal(errors[99].field, 'emails.98');
    assert.deepEqual(res.body.error.details, { errorsTruncated: true, maxErrors: 100 });
  });

  test('POST /contacts/lookup with 90,000 bad strings: bounded answer', async () => {
    const { result: res, stallMs } = await post(
      '/contacts/lookup',
      flood(90_000, '"x"', (emails) => `{"emails":${emails}}`),
    );
    const errors = assertBounded(res, stallMs);
    assert.equal(errors.length, 100);
    assert.deepEqual(errors[1], { field: 'emails.0', code: 'invalid_string', message: 'Invalid email address' });
  });

  const others: [method: string, path: string, field: string, message: string][] = [
    ['POST', '/segments/seg_x/members', 'emails', 'At most 1000 emails per call'],
    ['DELETE', '/segments/seg_x/members', 'emails', 'At most 1000 emails per call'],
    ['POST', '/contacts/bulk-delete', 'contactIds', 'At most 1000 contact ids per call'],
  ];
  for (const [method, path, field, message] of others) {
    test(`${method} ${path} with 90,000 ints: 422 within bounds`, async () => {
      const { result: res, stallMs } = await post(
        path,
        flood(90_000, '1', (items) => `{"${field}":${items}}`),
        method,
      );
      const errors = assertBounded(res, stallMs);
      assert.deepEqual(errors[0], { field, code: 'too_big', message });
      assert.equal(errors.length, 100);
      assert.deepEqual(res.body.error.details, { errorsTruncated: true, maxErrors: 100 });
    });
  }

  test('within the limits nothing changes: 51 good recipients, 3 bad ones', async () => {
    const many = Array.from({ length: 51 }, (_, i) => `u${i}@example.com`);
    const tooMany = await b.sk.post('/v1/send', { to: many, from: 'a@sandbox.herald.test', subject: 's', body: 'b' });
    assert.equal(tooMany.status, 422);
    assert.deepEqual(tooMany.body.error.errors, [{ field: 'to', code: 'too_big', message: 'Array must contain at most 50 element(s)' }]);
    const bad = await b.sk.post('/contacts/lookup', { emails: ['x', 1] });
    assert.deepEqual(bad.body.error.errors, [
      { field: 'emails.0', code: 'invalid_string', message: 'Invalid email address' },
      { field: 'emails.1', code: 'invalid_type', message: 'Expected string, received number', received: 'number' },
    ]);
    assert.equal(bad.body.error.details, undefined);
  });
});

describe('fieldErrors', () => {
  test('a union branch of 300,000 issues: no stack overflow, at most MAX_FIELD_ERRORS + 1 listed', () => {
    const issues: z.ZodIssue[] = Array.from({ length: 300_000 }, (_, i) => ({ code: 'custom', path: ['to', i], message: 'bad' }));
    const union = new z.ZodError([
      {
        code: 'invalid_union',
        path: ['to'],
        message: 'Invalid input',
        unionErrors: [new z.ZodError(issues), new z.ZodError([{ code: 'custom', path: ['to'], message: 'x' }])],
      },
    ]);
    const errors = fieldErrors(union);
    assert.equal(errors.length, MAX_FIELD_ERRORS + 1);
    assert.deepEqual(errors[0], { field: 'to.0', code: 'custom', message: 'bad' });
    const apiError = validationError(errors);
    assert.equal(apiError.errors?.length, MAX_FIELD_ERRORS);
    assert.deepEqual(apiError.details, { errorsTruncated: true, maxErrors: MAX_FIELD_ERRORS });
  });

  test('exactly MAX_FIELD_ERRORS errors are all listed, with no details', () => {
    const errors = Array.from({ length: MAX_FIELD_ERRORS }, (_, i) => ({ field: `f${i}`, code: 'custom', message: 'bad' }));
    const apiError = validationError(errors);
    assert.equal(apiError.errors?.length, MAX_FIELD_ERRORS);
    assert.equal(apiError.details, undefined);
  });
});
