import assert from 'node:assert/strict';
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { existsSync } from 'node:fs';
import { type IncomingMessage, type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../src/config.ts';
import { createS3Storage, signV4 } from '../src/modules/uploads/s3.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');
const BUCKET = 'herald-test';
const ACCESS_KEY = 'AKIDTEST';
const SECRET = 'secret';
const REGION = 'us-east-1';

type FakeS3 = {
  endpoint: string;
  objects: Map<string, { bytes: Buffer; contentType: string }>;
  log: { method: string; path: string; status: number; reason?: string }[];
  /** While set, every PUT is answered 503 SlowDown. */
  refusePuts: boolean;
  stop: () => Promise<void>;
};

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');
const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();

/** Checks a request's SigV4 Authorization header from scratch; returns why it is wrong, or null. */
function verifySignature(req: IncomingMessage, body: Buffer): string | null {
  const auth = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/s3\/aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$/.exec(
    req.headers.authorization ?? '',
  );
  if (!auth) return 'malformed Authorization';
  const [, accessKey, date, region, signedHeaders, signature] = auth;
  if (accessKey !== ACCESS_KEY) return 'unknown access key';
  if (region !== REGION) return 'wrong region';
  const amzDate = String(req.headers['x-amz-date'] ?? '');
  if (!/^\d{8}T\d{6}Z$/.test(amzDate) || amzDate.slice(0, 8) !== date) return 'bad x-amz-date';
  const sent = Date.parse(
    `${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 8)}T${amzDate.slice(9, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`,
  );
  if (Math.abs(Date.now() - sent) > 15 * 60_000) return 'request time too skewed';
  const payloadHash = String(req.headers['x-amz-content-sha256'] ?? '');
  if (payloadHash !== sha256(body)) return 'x-amz-content-sha256 does not match body';
  const names = signedHeaders.split(';');
  for (const required of ['host', 'x-amz-content-sha256', 'x-amz-date']) {
    if (!names.includes(required)) return `${required} not signed`;
  }
  if (req.method === 'PUT' && !names.includes('content-type')) return 'content-type not signed';
  const canonicalHeaders = names.map((n) => `${n}:${String(req.headers[n] ?? '').trim()}\n`).join('');
  const [pathname, query = ''] = (req.url ?? '').split('?');
  const canonicalRequest = [req.method, pathname, query, canonicalHeaders, signedHeaders, payloadHash].join('\n');
  const scope = `${date}/${region}/s3/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256(canonicalRequest)].join('\n');
  const key = hmac(hmac(hmac(hmac(`AWS4${SECRET}`, date), region), 's3'), 'aws4_request');
  const expected = createHmac('sha256', key).update(stringToSign).digest();
  return timingSafeEqual(expected, Buffer.from(signature, 'hex')) ? null : 'signature mismatch';
}

/** A path-style S3 that keeps objects in memory and refuses any request whose signature is wrong. */
async function startFakeS3(): Promise<FakeS3> {
  const objects: FakeS3['objects'] = new Map();
  const log: FakeS3['log'] = [];
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const reply = (status: number, payload: Buffer | string = '', headers: Record<string, string> = {}, reason?: string) => {
      log.push({ method: req.method ?? '', path: req.url ?? '', status, reason });
      res.writeHead(status, headers).end(payload);
    };
    const reason = verifySignature(req, body);
    if (reason) return reply(403, `<Error><Code>SignatureDoesNotMatch</Code><Message>${reason}</Message></Error>`, {}, reason);
    const objectPath = decodeURIComponent(req.url ?? '');
    if (!objectPath.startsWith(`/${BUCKET}/`)) return reply(404, '<Error><Code>NoSuchBucket</Code></Error>');
    const objectKey = objectPath.slice(BUCKET.length + 2);
    if (req.method === 'PUT') {
      if (fake.refusePuts) return reply(503, '<Error><Code>SlowDown</Code></Error>');
      objects.set(objectKey, { bytes: body, contentType: String(req.headers['content-type']) });
      return reply(200, '', { etag: `"${createHash('md5').update(body).digest('hex')}"` });
    }
    if (req.method === 'GET') {
      const object = objects.get(objectKey);
      if (!object) return reply(404, '<Error><Code>NoSuchKey</Code></Error>', { 'content-type': 'application/xml' });
      return reply(200, object.bytes, { 'content-type': object.contentType, 'content-length': String(object.bytes.length) });
    }
    if (req.method === 'DELETE') {
      objects.delete(objectKey);
      return reply(204); // as S3: whether or not the key existed
    }
    return reply(405);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const fake: FakeS3 = {
    endpoint: `http://127.0.0.1:${port}`,
    objects,
    log,
    refusePuts: false,
    stop: () => new Promise((resolve) => server.close(() => resolve())),
  };
  return fake;
}

function form(bytes: Buffer, filename: string): FormData {
  const fd = new FormData();
  fd.append('file', new Blob([new Uint8Array(bytes)], { type: 'image/png' }), filename);
  return fd;
}

let s3: FakeS3;
let server: TestServer;
let b: Bootstrapped;

before(async () => {
  s3 = await startFakeS3();
  server = await startTestServer({
    S3_BUCKET: BUCKET,
    S3_ENDPOINT: s3.endpoint,
    S3_ACCESS_KEY_ID: ACCESS_KEY,
    S3_SECRET_ACCESS_KEY: SECRET,
    // Far more than any disk: the floor guards DATA_DIR only, so uploads to a bucket go on regardless.
    UPLOAD_MIN_FREE_MB: '10000000',
  });
  b = await bootstrap(server.api);
});
after(async () => {
  await server?.stop();
  await s3?.stop();
});

describe('uploads in an S3-compatible bucket', () => {
  test('an upload is PUT, signed, into the bucket and served back through Herald', async () => {
    const res = await b.sk.request('POST', '/uploads/image', { raw: form(PNG, 'photo.png') });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.body.contentType, 'image/png');
    assert.equal(res.body.size, PNG.length);
    assert.ok(res.body.key.startsWith(`${b.project.id}/`) && res.body.key.endsWith('.png'), res.body.key);
    assert.equal(res.body.url, `${server.ctx.config.publicUrl}/uploads/${res.body.key}`);

    assert.deepEqual(s3.log, [{ method: 'PUT', path: `/${BUCKET}/${res.body.key}`, status: 200, reason: undefined }]);
    const object = s3.objects.get(res.body.key);
    assert.ok(object, 'object is in the bucket under the returned key');
    assert.equal(object.contentType, 'image/png');
    assert.deepEqual(object.bytes, PNG);

    const served = await fetch(`${server.url}/uploads/${res.body.key}`);
    assert.equal(served.status, 200);
    assert.equal(served.headers.get('content-type'), 'image/png');
    assert.equal(served.headers.get('content-length'), String(PNG.length));
    assert.equal(served.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    assert.equal(served.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(served.headers.get('content-security-policy'), "default-src 'none'; sandbox");
    assert.deepEqual(Buffer.from(await served.arrayBuffer()), PNG);
    assert.deepEqual(s3.log.at(-1), { method: 'GET', path: `/${BUCKET}/${res.body.key}`, status: 200, reason: undefined });

    assert.equal(existsSync(path.join(server.ctx.config.dataDir, 'uploads')), false, 'nothing under DATA_DIR/uploads');
  });

  test('a key missing from the bucket is a 404 UPLOAD_NOT_FOUND; foreign shapes never reach the bucket', async () => {
    const key = `${b.project.id}/01900000-0000-7000-8000-000000000000.png`;
    const before = s3.log.length;
    const res = await server.api.get(`/uploads/${key}`);
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'UPLOAD_NOT_FOUND');
    assert.deepEqual(s3.log.slice(before), [{ method: 'GET', path: `/${BUCKET}/${key}`, status: 404, reason: undefined }]);

    const foreign = await server.api.get(`/uploads/${b.project.id}%2F..%2F..%2Fother-bucket`);
    assert.equal(foreign.status, 404);
    assert.equal(s3.log.length, before + 1);
  });

  test('DELETE /uploads/* removes the object with a signed DELETE; the public URL is then a 404', async () => {
    const up = await b.sk.request('POST', '/uploads/image', { raw: form(PNG, 'gone.png') });
    assert.equal(up.status, 201, up.text);
    assert.ok(s3.objects.has(up.body.key));
    const before = s3.log.length;
    const res = await b.sk.request('DELETE', `/uploads/${up.body.key}`);
    assert.equal(res.status, 204, res.text);
    assert.deepEqual(s3.log.slice(before), [{ method: 'DELETE', path: `/${BUCKET}/${up.body.key}`, status: 204, reason: undefined }]);
    assert.equal(s3.objects.has(up.body.key), false);
    const served = await server.api.get(`/uploads/${up.body.key}`);
    assert.equal(served.status, 404);
    assert.equal(served.body.error.code, 'UPLOAD_NOT_FOUND');
    const listed = await b.sk.get('/uploads');
    assert.equal(
      listed.body.data.some((u: { key: string }) => u.key === up.body.key),
      false,
    );
  });

  test('a PUT the bucket refuses records nothing: no row, no usage', async () => {
    const p = await bootstrap(server.api, 'Refused');
    s3.refusePuts = true;
    try {
      const res = await p.sk.request('POST', '/uploads/image', { raw: form(PNG, 'refused.png') });
      assert.equal(res.status, 500, res.text);
    } finally {
      s3.refusePuts = false;
    }
    const listed = await p.sk.get('/uploads');
    assert.deepEqual(listed.body.data, []);
    assert.deepEqual(listed.body.usage, { bytes: 0, files: 0, quotaBytes: 100 * 1024 * 1024, maxFiles: 10_000 });
  });

  test("deleting a project deletes each of its objects from the bucket; other projects' stay", async () => {
    const doomed = await bootstrap(server.api, 'Doomed');
    const keys: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await doomed.sk.request('POST', '/uploads/image', { raw: form(PNG, `${i}.png`) });
      assert.equal(res.status, 201, res.text);
      keys.push(res.body.key);
    }
    const kept = await b.sk.request('POST', '/uploads/image', { raw: form(PNG, 'kept.png') });
    const before = s3.log.length;
    const res = await server.api.request('DELETE', `/users/@me/projects/${doomed.project.id}`, { cookie: doomed.cookie });
    assert.equal(res.status, 204, res.text);
    assert.deepEqual(
      s3.log
        .slice(before)
        .map((l) => `${l.method} ${l.path} ${l.status}`)
        .sort(),
      keys.map((key) => `DELETE /${BUCKET}/${key} 204`).sort(),
    );
    for (const key of keys) assert.equal(s3.objects.has(key), false, key);
    assert.ok(s3.objects.has(kept.body.key));
  });

  test('the fake bucket refuses a wrong secret, so the checks above prove the signature', async () => {
    const wrong = createS3Storage({
      bucket: BUCKET,
      endpoint: s3.endpoint,
      region: REGION,
      accessKeyId: ACCESS_KEY,
      secretAccessKey: 'not-the-secret',
      forcePathStyle: true,
    });
    await assert.rejects(wrong.put('x/y.png', PNG, 'image/png'), /S3 PUT x\/y\.png failed: HTTP 403 SignatureDoesNotMatch/);
    assert.equal(s3.log.at(-1)?.reason, 'signature mismatch');
    assert.equal(s3.objects.has('x/y.png'), false);
  });
});

describe('SigV4', () => {
  test('matches the GET Object example in the AWS Signature Version 4 documentation', () => {
    const headers = signV4(
      { region: 'us-east-1', accessKeyId: 'AKIAIOSFODNN7EXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY' },
      {
        method: 'GET',
        url: new URL('https://examplebucket.s3.amazonaws.com/test.txt'),
        headers: { range: 'bytes=0-9' },
        payloadHash: sha256(''),
        now: new Date('2013-05-24T00:00:00Z'),
      },
    );
    assert.equal(headers['x-amz-date'], '20130524T000000Z');
    assert.equal(
      headers.authorization,
      'AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, ' +
        'SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, ' +
        'Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41',
    );
  });
});

describe('S3 configuration', () => {
  test('S3_BUCKET without keys is a ConfigError naming the missing variable', () => {
    assert.throws(
      () => loadConfig({ S3_BUCKET: 'b' }),
      (err: Error) => err instanceof ConfigError && err.message === 'Invalid configuration: S3_ACCESS_KEY_ID is required when S3_BUCKET is set',
    );
    assert.throws(
      () => loadConfig({ S3_BUCKET: 'b', S3_ACCESS_KEY_ID: 'AKID' }),
      (err: Error) => err instanceof ConfigError && /S3_SECRET_ACCESS_KEY/.test(err.message),
    );
    assert.throws(
      () => loadConfig({ S3_ENDPOINT: 'ftp://x' }),
      (err: Error) => err instanceof ConfigError && /S3_ENDPOINT/.test(err.message),
    );
    assert.throws(() => loadConfig({ S3_FORCE_PATH_STYLE: 'maybe' }), /S3_FORCE_PATH_STYLE/);
  });

  test('defaults: no bucket means local files; the endpoint follows the region; path style', () => {
    assert.equal(loadConfig({ JWT_SECRET: 'x'.repeat(16) }).s3, undefined);
    const cfg = loadConfig({ JWT_SECRET: 'x'.repeat(16), S3_BUCKET: 'b', S3_REGION: 'eu-west-1', S3_ACCESS_KEY_ID: 'a', S3_SECRET_ACCESS_KEY: 's' });
    assert.deepEqual(cfg.s3, {
      bucket: 'b',
      endpoint: 'https://s3.eu-west-1.amazonaws.com',
      region: 'eu-west-1',
      accessKeyId: 'a',
      secretAccessKey: 's',
      forcePathStyle: true,
    });
  });
});
