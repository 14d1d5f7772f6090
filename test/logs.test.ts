import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import { type Runtime, startRuntime } from '../src/runtime.ts';
import { bootstrap } from './helpers/bootstrap.ts';
import { createApi } from './helpers/http.ts';
import { waitForStatus } from './helpers/mail.ts';
import { createTestDatabase } from './helpers/server.ts';
import { removeTempDataDirs, tempDataDir } from './helpers/data-dir.ts';

// Logs a person can read: one line per request without link tokens, one per email outcome.

type Line = { level: number; msg: string; [k: string]: unknown };
const lines: Line[] = [];
let runtime: Runtime;
let base: string;

before(async () => {
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l) as Line);
      done();
    },
  });
  const config = loadConfig({
    DATABASE_URL: await createTestDatabase(),
    DATA_DIR: await tempDataDir('herald-logs-'),
    JWT_SECRET: 'test-secret-0123456789abcdef',
  });
  runtime = await startRuntime(config, { log: pino({ level: 'info' }, sink) });
  await runtime.app!.listen({ port: 0, host: '127.0.0.1' });
  const address = runtime.app!.server.address();
  base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
});
after(async () => {
  await runtime?.stop();
  await removeTempDataDirs();
});

test('one line per request, with method, URL, status, time and request id; link tokens masked', async () => {
  const api = createApi(base);
  const res = await api.get('/unsubscribe/some.secret-token?utm=x&token=abc');
  const requestId = res.headers.get('x-request-id');
  const mine = lines.filter((l) => l.reqId === requestId);
  assert.equal(mine.length, 1, JSON.stringify(mine));
  const [line] = mine;
  assert.equal(line.method, 'GET');
  assert.equal(line.url, '/unsubscribe/:token?utm=x&token=***');
  assert.equal(line.statusCode, 404);
  assert.equal(typeof line.ms, 'number');
  assert.equal(line.msg, `GET /unsubscribe/:token?utm=x&token=*** 404 ${line.ms}ms`);
  assert.ok(!JSON.stringify(lines).includes('some.secret-token'));
});

test('no credential and no email address in a request line: tracking links, addresses in paths and queries, unmatched paths', async () => {
  const api = createApi(base);
  const b = await bootstrap(api);
  const logged = async (res: { headers: Headers }) => {
    const requestId = res.headers.get('x-request-id');
    const mine = lines.filter((l) => l.reqId === requestId && typeof l.url === 'string');
    assert.equal(mine.length, 1, JSON.stringify(mine));
    return mine[0].url;
  };
  const click = await fetch(`${base}/t/c/AmMBoiS-c2VjcmV0LWNsaWNrLXRva2Vu`, { redirect: 'manual' });
  assert.equal(await logged(click), '/t/c/*');
  assert.equal(await logged(await fetch(`${base}/t/o/AmMBoiS-c2VjcmV0LW9wZW4tdG9rZW4`)), '/t/o/*');
  assert.equal(await logged(await b.sk.delete('/suppressions/bob.private@example.com')), '/suppressions/***');
  assert.equal(await logged(await b.sk.delete('/suppressions/bob.private%40example.com')), '/suppressions/***');
  assert.equal(await logged(await api.get('/users/@me/projects', { cookie: b.cookie })), '/users/@me/projects');
  assert.equal(await logged(await b.sk.get('/contacts?search=carol.private%40example.com&limit=5')), '/contacts?search=***&limit=5');
  assert.equal(await logged(await b.sk.get('/contacts?email=dan.private@example.com')), '/contacts?email=***');
  for (const email of ['erin.private@example.com', 'frank.private@example.com']) assert.equal((await b.sk.post('/contacts', { email })).status, 201);
  const sorted = await b.sk.get('/contacts?sort=email&limit=1');
  assert.match(Buffer.from(sorted.body.cursor, 'base64url').toString(), /private@example\.com/, 'the cursor holds the address');
  assert.equal(await logged(await b.sk.get(`/contacts?sort=email&limit=1&cursor=${sorted.body.cursor}`)), '/contacts?sort=email&limit=1&cursor=***');
  assert.equal(await logged(await api.get('/unsubscribe/SECRET-UNSUB-TOKEN/extra')), '/unsubscribe/…');
  const keys = await api.get('/v1/x?apikey=S1&auth=S2&access_token=S3&code=S4&jwt=S5&session=S6&page=2');
  assert.equal(await logged(keys), '/v1/…?apikey=***&auth=***&access_token=***&code=***&jwt=***&session=***&page=2');
  const all = JSON.stringify(lines);
  for (const secret of ['private@', 'private%40', 'SECRET-UNSUB', 'c2VjcmV0', 'S1&', 'S6&', sorted.body.cursor])
    assert.ok(!all.includes(secret), `${secret} was logged`);
});

test('one line per email outcome, with the email id, project and reply, and no recipient', async () => {
  const b = await bootstrap(createApi(base));
  const sent = await b.sk.post('/v1/send', { to: 'grace@example.com', from: 'hi@sandbox.herald.test', subject: 'Hi', body: '<p>x</p>' });
  assert.equal(sent.status, 200, sent.text);
  const id = sent.body.data.emails[0].email;
  await waitForStatus(b.sk, id, ['DELIVERED']);
  const outcome = lines.filter((l) => l.emailId === id);
  assert.equal(outcome.length, 1);
  assert.equal(outcome[0].msg, `email ${id} delivered (project ${b.project.id}): captured (SMTP_URL is not set)`);
  assert.equal(outcome[0].projectId, b.project.id);
  assert.ok(!JSON.stringify(lines).includes('grace@example.com'));
});

test("an error logged as `err` anywhere in the runtime leaves out a database error's message and detail", async () => {
  const secret = 'grace.hopper@example.com';
  const err = await runtime.ctx.database.pool.query('SELECT $1::int', [secret]).then(
    () => assert.fail('the query must fail'),
    (e: unknown) => e,
  );
  assert.match(String((err as Error).message), /grace\.hopper/, 'the driver error itself carries the value');
  runtime.ctx.log.error({ err, jobId: 'j-1' }, 'import failed');
  const line = lines.find((l) => l.msg === 'import failed' && l.jobId === 'j-1');
  assert.ok(line);
  assert.ok(!JSON.stringify(line).includes(secret), JSON.stringify(line));
  assert.deepEqual([(line.err as { message: string }).message, (line.err as { sqlState: string }).sqlState], ['database error', '22P02']);
});

test('JSON lines on stdout go out in batches, yet a line is written within a second when nothing follows it, and every line by exit', async () => {
  // A process that logs one line, stays quiet for 3 s, then logs another and exits at once.
  const script = [
    `import { createLogger } from './src/logger.ts';`,
    `const log = createLogger({ logLevel: 'info', logFormat: 'json' });`,
    `log.info('first line');`,
    `setTimeout(() => { log.info('last line'); process.exit(0); }, 3000);`,
  ].join('\n');
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    cwd: path.resolve(import.meta.dirname, '..'),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  let beforeLast: boolean | null = null;
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    if (beforeLast === null && out.includes('"msg":"first line"')) beforeLast = !out.includes('"msg":"last line"');
  });
  const [code] = (await once(child, 'close')) as [number]; // after stdout has ended
  assert.equal(code, 0);
  assert.equal(beforeLast, true, 'the first line came out while the process was quiet, not only at exit');
  assert.match(out, /"msg":"last line"/);
});
