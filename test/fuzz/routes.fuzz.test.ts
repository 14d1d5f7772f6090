import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.ts';
import { type Bootstrapped, bootstrap } from '../helpers/bootstrap.ts';
import { routeTable } from '../helpers/routes.ts';
import { type TestServer, startTestServer } from '../helpers/server.ts';

/**
 * The permanent fuzz suite (issue 14): every route in Fastify's route table gets generated path
 * parameters, query strings and bodies full of hostile values; no answer is a 500 and every
 * error body has the spec's shape. Bounded to about a minute; FUZZ_RUNS=<n> runs longer.
 */

const RUNS = Number(process.env.FUZZ_RUNS ?? 3);

let server: TestServer;
let app: FastifyInstance;
let b: Bootstrapped;

before(async () => {
  server = await startTestServer();
  b = await bootstrap(server.api, 'fuzz');
  app = await buildApp(server.ctx);
  await app.ready();
});
after(async () => {
  await app?.close();
  await server?.stop();
});

const yearCursor = (date: string) => Buffer.from(JSON.stringify([date, 'cnt_00000000000000000000000000'])).toString('base64url');

const nastyString = fc.oneof(
  fc.constantFrom(
    '\u0000',
    'a\u0000b',
    '\uD800',
    'x\uDFFFy',
    '\u2028\u2029',
    'x'.repeat(10_000),
    '__proto__',
    'constructor',
    '0000-01-01',
    '+275760-09-13T00:00:00.000Z',
    yearCursor('0000-01-01T00:00:00.000Z'),
    yearCursor('+275760-09-13T00:00:00.000Z'),
    '1e21',
    '-0',
    'NaN',
    '',
    ' ',
    '../../etc/passwd',
    '%00',
    '{{ x | split: "" }}',
    '<a '.repeat(100),
  ),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
);
const nastyNumber = fc.constantFrom(1e21, -0, -1, 0, 1e20, Number.MAX_SAFE_INTEGER + 2, 0.5, 2 ** 53);
const manyKeys = fc.constant(Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`k${i}`, i])));
const protoKeys = fc.constant(JSON.parse('{"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}}}'));
const leaf = fc.oneof(nastyString, nastyNumber, fc.boolean(), fc.constant(null));
const value: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  v: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    leaf,
    fc.array(tie('v'), { maxLength: 3 }),
    fc.dictionary(nastyString, tie('v'), { maxKeys: 4 }),
    manyKeys,
    protoKeys,
  ),
})).v;

/** A body shaped like the route's likely fields, with hostile values at every level. */
const fieldNames = [
  'email',
  'name',
  'subject',
  'body',
  'to',
  'from',
  'data',
  'event',
  'template',
  'condition',
  'type',
  'emails',
  'ids',
  'password',
  'token',
  'headers',
  'attachments',
  'status',
  'scheduledFor',
  'description',
  'contactIds',
  'subscribed',
  'tracking',
  'role',
];
const body = fc.oneof(value, fc.dictionary(fc.constantFrom(...fieldNames), value, { maxKeys: 6 }));
const query = fc.dictionary(
  fc.constantFrom('page', 'pageSize', 'limit', 'cursor', 'search', 'from', 'to', 'status', 'contactId', 'sort', 'dir', 'campaignId', 'type', 'name'),
  nastyString,
  { maxKeys: 4 },
);

function encodeSegment(s: string): string {
  try {
    return encodeURIComponent(s);
  } catch {
    return '%ED%A0%80'; // a lone surrogate, as bytes
  }
}

function assertErrorShape(status: number, text: string, what: string) {
  if (status < 400 || text === '') return;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return; // HTML pages (preference and expired-link pages) are not API errors
  }
  const p = parsed as { success?: unknown; error?: { code?: unknown; message?: unknown; statusCode?: unknown; requestId?: unknown } | string };
  if (typeof p.error === 'string') return; // the spec's simple 400 body
  assert.equal(p.success, false, `${what}: ${text.slice(0, 300)}`);
  assert.ok(p.error && typeof p.error === 'object', what);
  assert.equal(typeof p.error.code, 'string', what);
  assert.equal(typeof p.error.message, 'string', what);
  assert.equal(p.error.statusCode, status, what);
  assert.equal(typeof p.error.requestId, 'string', what);
}

describe('every route, hostile input', () => {
  test('no generated request answers 500, and every error has the spec shape', async () => {
    const routes = routeTable(app);
    assert.ok(routes.length > 50, `the route table was read (${routes.length} routes)`);
    const auths = [
      { authorization: `Bearer ${b.project.secretKey}` },
      { authorization: `Bearer ${b.project.publicKey}` },
      { cookie: b.cookie, 'x-project-id': b.project.id },
    ];
    for (const [method, path] of routes) {
      await fc.assert(
        fc.asyncProperty(fc.array(nastyString, { minLength: 3, maxLength: 3 }), query, body, fc.nat(auths.length - 1), async (params, q, payload, auth) => {
          let i = 0;
          const url = path.replace(/:[A-Za-z]+|\*/g, () => encodeSegment(params[i++ % params.length]));
          const qs = Object.entries(q)
            .map(([k, v]) => `${k}=${encodeSegment(v)}`)
            .join('&');
          const res = await app.inject({
            method: method as 'GET',
            url: qs ? `${url}?${qs}` : url,
            headers: { ...auths[auth], ...(method === 'GET' || method === 'DELETE' ? {} : { 'content-type': 'application/json' }) },
            ...(method === 'GET' || method === 'DELETE' ? {} : { payload: JSON.stringify(payload) ?? 'null' }),
          });
          const what = `${method} ${path} → ${res.statusCode}`;
          assert.ok(res.statusCode < 500, `${what}: ${res.body.slice(0, 300)}`);
          assertErrorShape(res.statusCode, res.body, what);
        }),
        { numRuns: RUNS, endOnFailure: true },
      );
    }
  });
});
