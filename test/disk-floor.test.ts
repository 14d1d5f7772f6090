import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { recomputeAllSegments } from '../src/modules/segments/membership.ts';
import { bootstrap } from './helpers/bootstrap.ts';
import { verifyDomain } from './helpers/domains.ts';
import { type Res, createApi } from './helpers/http.ts';
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

test('a sending campaign writes no emails while the disk is below twice its floor, and delivers them all once there is room', async () => {
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
  // Below twice the floor already, campaigns wait.
  server.ctx.diskRoom = { watched: true, level: () => (room ? 'ok' : 'filling') };
  try {
    assert.deepEqual((await server.api.get('/health')).body, { status: 'degraded', checks: { database: 'ok', secrets: 'ok', disk: 'filling' } });
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

test('below twice the floor, a project that wrote more than 10 MB lately is refused (507, nothing written) while the others write, and reads and deletes go on', async () => {
  const heavy = await bootstrap(env.server.api, 'floor heavy');
  const light = await bootstrap(env.server.api, 'floor light');
  const real = full.ctx.diskRoom;
  let level: 'ok' | 'filling' = 'ok';
  full.ctx.diskRoom = { watched: true, level: () => level };
  try {
    const hk = createApi(full.url, { key: heavy.project.secretKey });
    const lk = createApi(full.url, { key: light.project.secretKey });
    const blob = 'x'.repeat(250_000); // about the most a request may set in a contact's data (256 KB)
    // With room, the heavy writer is accepted: what it writes counts only once the disk fills.
    for (let i = 0; i < 3; i++) assert.equal((await hk.post('/contacts', { email: `early${i}@heavy.test`, data: { blob } })).status, 201);
    level = 'filling';
    assert.deepEqual((await full.api.get('/health')).body, { status: 'degraded', checks: { database: 'ok', secrets: 'ok', disk: 'filling' } });
    let accepted = 0;
    let refused: Res | undefined;
    for (let i = 0; i < 60 && !refused; i++) {
      const res = await hk.post('/contacts', { email: `big${i}@heavy.test`, data: { blob } });
      if (res.status === 201) accepted++;
      else refused = res;
    }
    // 10 MB of bodies (the 3 written with room count too), less what drained meanwhile (1 MB a
    // minute): about the 43rd write of 250 KB is the first refused.
    assert.ok(refused, 'a heavy writer was refused');
    assert.ok(3 + accepted >= 41 && 3 + accepted <= 44, `${3 + accepted} accepted`);
    assert.equal(refused.status, 507, refused.text);
    assert.equal(refused.body.error.code, 'INSUFFICIENT_STORAGE');
    assert.match(
      refused.body.error.message,
      /^The server's database disk is filling up, and this project wrote about 1[01] MB lately, more than the 10 MB a project may while it fills/,
    );
    assert.equal(refused.body.error.details.limitMb, 10);
    assert.ok(refused.body.error.details.retryAfter >= 1 && refused.body.error.details.retryAfter <= 120, refused.text);
    assert.equal(refused.headers.get('retry-after'), String(refused.body.error.details.retryAfter));
    // A small write of the same project is refused too, and nothing of either is stored.
    const small = await hk.post('/contacts', { email: 'small@heavy.test' });
    assert.equal(small.status, 507, small.text);
    const lookup = await hk.post('/contacts/lookup', { emails: [`big${accepted}@heavy.test`, 'small@heavy.test'] });
    assert.deepEqual(lookup.body.notFound ?? lookup.body.data?.notFound, [`big${accepted}@heavy.test`, 'small@heavy.test'], lookup.text);
    // Its reads and deletes go on.
    const listed = await hk.get('/contacts?limit=1');
    assert.equal(listed.status, 200, listed.text);
    assert.equal(listed.body.total, 3 + accepted);
    assert.equal((await hk.delete(`/contacts/${listed.body.data[0].id}`)).status, 204);

    // Another project writes, and its track and send are accepted.
    assert.equal((await lk.post('/contacts', { email: 'light@light.test', data: { plan: 'pro' } })).status, 201);
    assert.equal((await createApi(full.url, { key: light.project.publicKey }).post('/v1/track', { email: 'light@light.test', event: 'visit' })).status, 200);

    // With room again, the heavy writer is accepted.
    level = 'ok';
    assert.equal((await hk.post('/contacts', { email: 'after@heavy.test' })).status, 201);
  } finally {
    full.ctx.diskRoom = real;
  }
});

test("below twice the floor, a segment's compute and the 5-minute job's change no membership; with room they go on", async () => {
  const server = env.server;
  const p = await bootstrap(server.api, 'floor segment');
  for (const email of ['ann@floor-segment.test', 'bob@floor-segment.test']) {
    assert.equal((await p.sk.post('/contacts', { email, data: { plan: 'pro' } })).status, 201);
  }
  const condition = { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }] };
  const made = await p.sk.post('/segments', { name: 'Floor pros', condition, trackMembership: true });
  assert.equal(made.status, 201, made.text);
  const id = made.body.id;
  const members = async () => (await server.sql<{ n: number }>('SELECT count(*)::int AS n FROM segment_members WHERE segment_id = $1', [id]))[0].n;
  const entries = async () => (await p.sk.get('/events?name=segment.floor-pros.entry&limit=10')).body.total;

  const real = server.ctx.diskRoom;
  server.ctx.diskRoom = { watched: true, level: () => 'filling' };
  try {
    const refused = await p.sk.post(`/segments/${id}/compute`);
    assert.equal(refused.status, 507, refused.text);
    assert.equal(refused.body.error.code, 'INSUFFICIENT_STORAGE');
    assert.match(refused.body.error.message, /^The server's database disk is filling up: membership computes, .* wait until it has room again/);
    assert.deepEqual(refused.body.error.details, { added: 0, removed: 0 });
    await recomputeAllSegments(server.ctx, { runMs: 60_000, projectMs: 60_000 });
    assert.deepEqual([await members(), await entries()], [0, 0]);
  } finally {
    server.ctx.diskRoom = real;
  }
  await recomputeAllSegments(server.ctx, { runMs: 60_000, projectMs: 60_000 });
  assert.deepEqual([await members(), await entries()], [2, 2]);
  assert.deepEqual((await p.sk.post(`/segments/${id}/compute`)).body, { added: 0, removed: 0, total: 2 });
});

test('a DATABASE_DISK_PATH that cannot be read stops start-up and says what to set', async () => {
  const missing = path.join(floorDir, 'no-such-directory');
  await assert.rejects(startTestServer({ PROCESS_ROLE: 'api', DATABASE_DISK_PATH: missing }, { databaseUrl: env.server.databaseUrl }), (err: Error) => {
    assert.equal(err.name, 'StartupError');
    assert.equal(err.message, `The database's disk cannot be read at ${missing}: set DATABASE_DISK_PATH to a directory on it, or DATABASE_MIN_FREE_MB=0`);
    return true;
  });
});
