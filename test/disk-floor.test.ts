import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { bootstrap } from './helpers/bootstrap.ts';
import { verifyDomain } from './helpers/domains.ts';
import { createApi } from './helpers/http.ts';
import { type MailEnv, startMailEnv } from './helpers/mail.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { waitFor } from './helpers/workflows.ts';

/**
 * Below DATABASE_MIN_FREE_MB free on the database's disk (db/disk-room.ts), the API refuses the
 * writes that add data with 507 INSUFFICIENT_STORAGE and writes nothing of them (http/disk-floor.ts);
 * reads, deletes, sign-ins, unsubscribes and cancels go on, and a sending campaign writes no more
 * emails until there is room again. The first server here reads a real disk against a floor no disk
 * reaches; the campaign's server is given its reading (the disk of a test machine cannot be filled).
 */

const DOMAIN = 'floor.example.test';
const FROM = `news@${DOMAIN}`;
const NO_DISK_HAS_THIS_FREE_MB = '10000000'; // 10 TB

let env: MailEnv;
let floorDir: string;
let full: TestServer;
before(async () => {
  env = await startMailEnv();
  floorDir = await mkdtemp(path.join(tmpdir(), 'herald-disk-floor-'));
  // An API process on env.server's database, serving its projects (its jobs run in env.server).
  full = await startTestServer(
    { PROCESS_ROLE: 'api', DATABASE_DISK_PATH: floorDir, DATABASE_MIN_FREE_MB: NO_DISK_HAS_THIS_FREE_MB },
    { databaseUrl: env.server.databaseUrl },
  );
});
after(async () => {
  await full?.stop();
  await env?.stop();
  await rm(floorDir, { recursive: true, force: true });
});

const DISK_FULL =
  "The server's database disk is nearly full: writes that add data are paused until its operator frees space (DATABASE_MIN_FREE_MB). Reads and deletes still work";

test('below the floor, writes that add data answer 507 and write nothing; reads, deletes, sign-in and bulk unsubscribes are answered', async () => {
  const p = await bootstrap(env.server.api, 'floor');
  const user = { email: 'owner@floor.test', password: 'correct horse battery' };
  assert.equal((await env.server.api.post('/auth/signup', user)).status, 201);
  const kept = await p.sk.post('/contacts', { email: 'kept@floor.test' });
  const gone = await p.sk.post('/contacts', { email: 'gone@floor.test' });
  assert.deepEqual([kept.status, gone.status], [201, 201]);
  // The same project through the server whose disk is below its floor.
  const sk = createApi(full.url, { key: p.project.secretKey });
  const pk = createApi(full.url, { key: p.project.publicKey });

  const refused = [
    await sk.post('/contacts', { email: 'new@floor.test' }),
    await sk.patch(`/contacts/${kept.body.id}`, { data: { plan: 'pro' } }),
    await pk.post('/v1/track', { email: 'tracked@floor.test', event: 'visit' }),
    await sk.post('/v1/send', { to: 'new@floor.test', from: FROM, subject: 's', body: 'b' }),
    await sk.post('/templates', { name: 't', subject: 's', body: '<p>b</p>', from: FROM }),
    await full.api.post('/auth/signup', { email: 'new-user@floor.test', password: 'correct horse battery' }),
  ];
  for (const res of refused) {
    assert.equal(res.status, 507, res.text);
    assert.deepEqual([res.body.error.code, res.body.error.message], ['INSUFFICIENT_STORAGE', DISK_FULL]);
  }
  // Nothing of them was written.
  const list = await sk.get('/contacts?limit=10');
  assert.equal(list.status, 200, list.text);
  assert.deepEqual(list.body.data.map((c: { email: string }) => c.email).sort(), ['gone@floor.test', 'kept@floor.test']);
  assert.deepEqual((await sk.get(`/contacts/${kept.body.id}`)).body.data, {});
  assert.equal((await sk.get('/events?limit=1')).body.total, 0);
  assert.equal((await sk.get('/templates')).body.data.length, 0);

  // Deletes free space; sign-in, a lookup (a read by POST) and a bulk unsubscribe must not wait.
  assert.equal((await sk.delete(`/contacts/${gone.body.id}`)).status, 204);
  assert.equal((await full.api.post('/auth/login', user)).status, 200);
  assert.equal((await sk.post('/contacts/lookup', { emails: ['kept@floor.test'] })).status, 200);
  const unsubscribe = await sk.post('/contacts/bulk-unsubscribe', { contactIds: [kept.body.id] });
  assert.equal(unsubscribe.status, 202, unsubscribe.text);
  await waitFor('the bulk unsubscribe', async () => (await sk.get(`/contacts/${kept.body.id}`)).body.subscribed === false);

  // The document says which writes may answer 507.
  const paths = (await full.api.get('/openapi.json')).body.paths;
  assert.ok(paths['/contacts'].post.responses['507']);
  assert.ok(paths['/v1/track'].post.responses['507']);
  assert.equal(paths['/contacts/lookup'].post.responses['507'], undefined);
  assert.equal(paths['/auth/login'].post.responses['507'], undefined);
  assert.equal(paths['/unsubscribe/{token}'].post.responses['507'], undefined);
  assert.equal(paths['/contacts/{id}'].delete.responses['507'], undefined);
  assert.equal(paths['/contacts'].get.responses['507'], undefined);

  // Monitoring sees it: the floor's server is degraded, the other's disk is not watched (an external DATABASE_URL, no DATABASE_DISK_PATH).
  assert.deepEqual((await full.api.get('/health')).body, { status: 'degraded', checks: { database: 'ok', secrets: 'ok', disk: 'low' } });
  assert.deepEqual((await env.server.api.get('/health')).body, { status: 'ok', checks: { database: 'ok', secrets: 'ok', disk: 'unwatched' } });

  // The server with room accepts the same write.
  assert.equal((await p.sk.post('/contacts', { email: 'new@floor.test' })).status, 201);
});

test('a sending campaign writes no emails while the disk is below the floor, and delivers them all once there is room', async () => {
  const server = env.server;
  const p = await bootstrap(server.api, 'floor campaign');
  await verifyDomain(p.sk, env.dns, DOMAIN);
  const recipients = Array.from({ length: 5 }, (_, i) => `reader${i}@floor-campaign.test`);
  for (const email of recipients) assert.equal((await p.sk.post('/contacts', { email })).status, 201);
  const created = await p.sk.post('/campaigns', { name: 'Floor', subject: 'Floor news', body: '<p>News</p>', from: FROM });
  assert.equal(created.status, 201, created.text);
  const id = created.body.data.id;
  const scheduled = await p.sk.post(`/campaigns/${id}/send`, { scheduledFor: new Date(Date.now() + 1_500).toISOString() });
  assert.equal(scheduled.status, 200, scheduled.text);

  const real = server.ctx.diskRoom;
  let room = false;
  server.ctx.diskRoom = { watched: true, hasRoom: () => room };
  try {
    assert.equal((await server.api.get('/health')).body.checks.disk, 'low');
    await waitFor('the campaign to start', async () => (await p.sk.get(`/campaigns/${id}`)).body.status === 'SENDING');
    await sleep(2_500); // two more ticks of its engine
    const waiting = await p.sk.get(`/emails?campaignId=${id}`);
    assert.deepEqual([waiting.body.total, (await p.sk.get(`/campaigns/${id}`)).body.status], [0, 'SENDING']);
    assert.equal(env.sink.messages.filter((m) => m.parsed.subject === 'Floor news').length, 0);
    room = true;
    assert.deepEqual((await server.api.get('/health')).body, { status: 'ok', checks: { database: 'ok', secrets: 'ok', disk: 'ok' } });
    await waitFor('the campaign to be sent', async () => (await p.sk.get(`/campaigns/${id}`)).body.status === 'SENT', 20_000);
  } finally {
    server.ctx.diskRoom = real;
  }
  await waitFor('every message at the relay', async () => env.sink.messages.filter((m) => m.parsed.subject === 'Floor news').length === 5);
  const delivered = env.sink.messages.filter((m) => m.parsed.subject === 'Floor news').flatMap((m) => m.envelope.to);
  assert.deepEqual(delivered.sort(), recipients);
});

test('a DATABASE_DISK_PATH that cannot be read stops start-up and says what to set', async () => {
  const missing = path.join(floorDir, 'no-such-directory');
  await assert.rejects(startTestServer({ PROCESS_ROLE: 'api', DATABASE_DISK_PATH: missing }, { databaseUrl: env.server.databaseUrl }), (err: Error) => {
    assert.equal(err.name, 'StartupError');
    assert.equal(err.message, `The database's disk cannot be read at ${missing}: set DATABASE_DISK_PATH to a directory on it, or DATABASE_MIN_FREE_MB=0`);
    return true;
  });
});
