import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { slowestHealthDuring } from './helpers/health.ts';
import { waitForStatus } from './helpers/mail.ts';
import { watchProcess } from './helpers/process-watch.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

// GET /emails/:id/raw streams the captured source a slice at a time (src/modules/emails/raw-source.ts).

const run = promisify(execFile);
type Download = { status: number; bytes: number; sha256: string; contentLength: string | null; code?: string; retryAfter?: string | null; error?: string };

/**
 * Downloads run in a child process, so that only the server's work is measured in this one. Each
 * download reads the body as a stream and reports its size and SHA-256, or how the body broke off.
 */
const CLIENT = `
const [jobs, pauseMs] = [JSON.parse(process.argv[1]), Number(process.argv[2])];
const { createHash } = await import('node:crypto');
const one = async ({ url, key }) => {
  const res = await fetch(url, { headers: { authorization: 'Bearer ' + key } });
  const out = { status: res.status, bytes: 0, sha256: '', contentLength: res.headers.get('content-length') };
  if (res.status !== 200) {
    const body = await res.json();
    return { ...out, code: body.error?.code, retryAfter: res.headers.get('retry-after') };
  }
  const hash = createHash('sha256');
  try {
    for await (const chunk of res.body) {
      hash.update(chunk);
      out.bytes += chunk.byteLength;
      if (pauseMs) await new Promise((r) => setTimeout(r, pauseMs));
    }
  } catch (err) {
    return { ...out, error: String(err.cause?.code ?? err.cause?.message ?? err.message) };
  }
  return { ...out, sha256: hash.digest('hex') };
};
console.log(JSON.stringify(await Promise.all(jobs.map(one))));
`;

/** One child process for all the downloads: starting one holds this process's event loop. */
async function download(jobs: { url: string; key: string }[], pauseMs = 0): Promise<Download[]> {
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', CLIENT, JSON.stringify(jobs), String(pauseMs)], {
    maxBuffer: 1 << 20,
  });
  return JSON.parse(stdout) as Download[];
}

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('GET /emails/:id/raw', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(() => server?.stop());

  /** A captured email of the project whose stored source is then replaced by `source`, to keep the send small. */
  async function capturedEmail(p: Bootstrapped, source: Buffer): Promise<string> {
    const sent = await p.sk.post('/v1/send', { to: 'ada@example.org', from: 'hello@sandbox.herald.test', subject: 's', body: '<p>x</p>' });
    assert.equal(sent.status, 200, sent.text);
    const id: string = sent.body.data.emails[0].email;
    const email = await waitForStatus(p.sk, id, ['DELIVERED', 'FAILED']);
    assert.equal(email.status, 'DELIVERED', email.error);
    await server.sql('UPDATE email_raw SET raw = $2 WHERE email_id = $1', [id, source]);
    return id;
  }

  test('a multi-megabyte source arrives byte for byte, with its Content-Length', async () => {
    const p = await bootstrap(server.api);
    // Not a whole number of slices, so the last one is short.
    const source = randomBytes(5 * 1024 * 1024 + 12_345);
    const id = await capturedEmail(p, source);
    const [got] = await download([{ url: `${server.url}/emails/${id}/raw`, key: p.project.secretKey }]);
    assert.deepEqual(got, { status: 200, bytes: source.length, sha256: sha256(source), contentLength: String(source.length) });

    const res = await fetch(`${server.url}/emails/${id}/raw`, { headers: { authorization: `Bearer ${p.project.secretKey}` } });
    assert.equal(res.headers.get('content-type'), 'message/rfc822');
    await res.arrayBuffer();
    const head = await fetch(`${server.url}/emails/${id}/raw`, { method: 'HEAD', headers: { authorization: `Bearer ${p.project.secretKey}` } });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-length'), String(source.length));
  });

  test('the 404 and 410 answers are unchanged', async () => {
    const p = await bootstrap(server.api);
    const missing = '00000000-0000-4000-8000-000000000000';
    const notFound = await p.sk.get(`/emails/${missing}/raw`);
    assert.equal(notFound.status, 404);
    assert.equal(notFound.body.error.code, 'EMAIL_NOT_FOUND');
    assert.equal(notFound.body.error.message, 'Email not found');

    const id = await capturedEmail(p, Buffer.from('Subject: hi\r\n\r\nbody\r\n'));
    await server.sql('DELETE FROM email_raw WHERE email_id = $1', [id]);
    const notCaptured = await p.sk.get(`/emails/${id}/raw`);
    assert.equal(notCaptured.status, 404);
    assert.equal(notCaptured.body.error.code, 'EMAIL_NOT_FOUND');
    assert.match(notCaptured.body.error.message, /^No captured source/);
    assert.deepEqual(notCaptured.body.error.details, { resource: 'email', id });

    await server.sql('UPDATE email_contents SET cleared_at = now() WHERE id = (SELECT content_id FROM emails WHERE id = $1)', [id]);
    const expired = await p.sk.get(`/emails/${id}/raw`);
    assert.equal(expired.status, 410);
    assert.equal(expired.body.error.code, 'EMAIL_SOURCE_EXPIRED');
    assert.deepEqual(expired.body.error.details, { resource: 'email', id });
  });

  test('a third download of a project at once is a 429 with Retry-After; the slots come back when downloads end', async () => {
    const p = await bootstrap(server.api);
    const source = randomBytes(6 * 1024 * 1024);
    const id = await capturedEmail(p, source);
    const job = { url: `${server.url}/emails/${id}/raw`, key: p.project.secretKey };
    // Slow readers (20 ms a read, about 2 s in all): the first two are still downloading when the third asks.
    const got = await download([job, job, job], 20);
    const ok = got.filter((d) => d.status === 200);
    const refused = got.filter((d) => d.status === 429);
    assert.equal(ok.length, 2, JSON.stringify(got));
    for (const d of ok) assert.equal(d.sha256, sha256(source));
    assert.equal(refused.length, 1, JSON.stringify(got));
    assert.equal(refused[0].code, 'RATE_LIMIT_EXCEEDED');
    assert.equal(refused[0].retryAfter, '1');

    const limited = await p.sk.get(`/emails/00000000-0000-4000-8000-000000000000/raw`);
    assert.equal(limited.status, 404, 'both slots were released');
    const other = await bootstrap(server.api);
    const [again] = await download([job]);
    assert.equal(again.sha256, sha256(source));
    assert.equal((await other.sk.get(`/emails/${id}/raw`)).status, 404, 'another project cannot read it');
  });

  test('a source cleared during its download cuts the response short instead of hanging', async () => {
    const p = await bootstrap(server.api);
    const source = randomBytes(40 * 1024 * 1024);
    const id = await capturedEmail(p, source);
    const res = await fetch(`${server.url}/emails/${id}/raw`, { headers: { authorization: `Bearer ${p.project.secretKey}` } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-length'), String(source.length));
    const reader = res.body!.getReader();
    let bytes = (await reader.read()).value!.byteLength;
    await server.sql('DELETE FROM email_raw WHERE email_id = $1', [id]);
    const broke = await (async () => {
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) return null;
          bytes += value.byteLength;
        }
      } catch (err) {
        return err as Error;
      }
    })();
    assert.ok(broke, `the body ended normally after ${bytes} bytes`);
    assert.ok(bytes < source.length, `${bytes} bytes arrived`);
    // The download's slot was released: two more go through at once.
    await server.sql('INSERT INTO email_raw (email_id, raw) VALUES ($1, $2)', [id, Buffer.from('x')]);
    const job = { url: `${server.url}/emails/${id}/raw`, key: p.project.secretKey };
    const twice = await download([job, job]);
    assert.deepEqual(
      twice.map((d) => [d.status, d.bytes]),
      [
        [200, 1],
        [200, 1],
      ],
    );
  });

  test('eight downloads of 14 MB sources at once hold neither memory nor the event loop', async () => {
    // Four projects, two downloads each. The old code read each source whole (a 28 MB hex string,
    // then a 14 MB Buffer): +150–370 MB, stalls of 110–1200 ms on a loaded 2-core host.
    const projects = await Promise.all([1, 2, 3, 4].map(() => bootstrap(server.api)));
    const sources = projects.map(() => randomBytes(14 * 1024 * 1024));
    const ids = await Promise.all(projects.map((p, i) => capturedEmail(p, sources[i])));
    const jobs = projects.flatMap((p, i) => [0, 1].map(() => ({ url: `${server.url}/emails/${ids[i]}/raw`, key: p.project.secretKey })));
    await new Promise((r) => setTimeout(r, 500));
    const watched = await watchProcess(() => slowestHealthDuring(server.url, download(jobs)));
    const got = watched.result.result;
    assert.deepEqual(
      got.map((d) => [d.status, d.sha256]),
      jobs.map((_, j) => [200, sha256(sources[Math.floor(j / 2)])]),
    );
    const [stall, health, grew] = [watched.stallMs, watched.result.slowest, watched.rssMB].map(Math.round);
    console.log(`8 downloads of 14 MB: ${Math.round(watched.ms)} ms, event loop held ${stall} ms, slowest /health ${health} ms, +${grew} MB`);
    // About two 1 MB slices a download, and their short-lived text: 0–36 MB measured.
    assert.ok(grew < 80, `the process grew by ${grew} MB`);
    assert.ok(stall < 500, `the event loop was held ${stall} ms`);
  });
});
