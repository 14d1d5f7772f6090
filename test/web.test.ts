import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { WEB_DIST } from '../src/modules/web/build-state.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/** How the server serves the built dashboard next to the API (web/dist is built by the test setup). */

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(async () => server?.stop());

type ErrorJson = { error: { code: string } };

const get = (p: string, headers: Record<string, string> = {}) => fetch(server.url + p, { headers, redirect: 'manual' });

test('GET / redirects to the dashboard', async () => {
  const res = await get('/');
  assert.equal(res.status, 302);
  assert.equal(res.headers.get('location'), '/app/');
});

test('every dashboard URL answers the app shell with a strict CSP and no caching', async () => {
  for (const p of ['/app', '/app/', '/app/login', '/app/p/prj_123/contacts/cnt_1', '/app/p/prj_1/campaigns?status=SENT']) {
    const res = await get(p);
    assert.equal(res.status, 200, p);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/, p);
    const html = await res.text();
    assert.match(html, /<div id="root"><\/div>/, p);
    assert.match(html, /<script type="module" crossorigin src="\/app\/assets\/index-[\w-]+\.js"><\/script>/, p);
    assert.equal(res.headers.get('cache-control'), 'no-cache', p);
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.match(csp, /default-src 'self'/);
    assert.match(csp, /script-src 'self'(;|$)/, 'no inline script, no eval');
    assert.match(csp, /frame-ancestors 'none'/);
    assert.match(csp, /object-src 'none'/);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
  }
});

test('hashed assets are cached for a year; a missing asset is a 404, not the HTML page', async () => {
  const [js] = readdirSync(path.join(WEB_DIST, 'assets')).filter((f) => f.endsWith('.js'));
  const res = await get(`/app/assets/${js}`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /javascript/);
  assert.equal(res.headers.get('cache-control'), 'public, max-age=31536000, immutable');
  await res.arrayBuffer();

  const missing = await get('/app/assets/index-doesnotexist.js');
  assert.equal(missing.status, 404);
  assert.match(missing.headers.get('content-type') ?? '', /application\/json/);
  assert.equal(((await missing.json()) as ErrorJson).error.code, 'RESOURCE_NOT_FOUND');
});

test('API routes are never shadowed: they keep their JSON answers and JSON 404s', async () => {
  const contacts = await get('/contacts', { accept: 'text/html' });
  assert.equal(contacts.status, 401);
  assert.equal(((await contacts.json()) as ErrorJson).error.code, 'INVALID_API_KEY');

  for (const p of ['/no-such-route', '/contacts/x/y/z', '/v1/nothing', '/apps']) {
    const res = await get(p, { accept: 'text/html' });
    assert.equal(res.status, 404, p);
    const body = (await res.json()) as ErrorJson;
    assert.equal(body.error.code, 'RESOURCE_NOT_FOUND', p);
    assert.equal(res.headers.get('content-security-policy'), null, 'API answers carry no dashboard headers');
  }

  const health = await get('/health');
  assert.equal(health.status, 200);
  assert.deepEqual(await health.json(), { status: 'ok', checks: { database: 'ok', secrets: 'ok', disk: 'unwatched' } });
});
