import { createHash, createHmac } from 'node:crypto';
import { Readable } from 'node:stream';
import type { S3Config } from '../../config.ts';
import type { UploadStorage } from './storage.ts';

/**
 * PUT/GET/DELETE Object against any S3-compatible API (AWS, MinIO, R2, …), signed with AWS Signature
 * Version 4 by hand so that three requests don't cost us the whole AWS SDK.
 */

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');
const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();

/** RFC 3986 encoding as SigV4 wants it: everything but unreserved characters, `/` kept between segments. */
const encodePath = (p: string) =>
  p
    .split('/')
    .map((s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`))
    .join('/');

export type SignInput = {
  method: 'GET' | 'PUT' | 'DELETE';
  url: URL;
  headers: Record<string, string>;
  payloadHash: string;
  now: Date;
};

/** Returns the headers to send: the given ones plus x-amz-content-sha256, x-amz-date and Authorization. */
export function signV4(cfg: Pick<S3Config, 'region' | 'accessKeyId' | 'secretAccessKey'>, req: SignInput): Record<string, string> {
  const amzDate = req.now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, ''); // 20250101T000000Z
  const date = amzDate.slice(0, 8);
  const headers: Record<string, string> = {
    ...req.headers,
    'x-amz-content-sha256': req.payloadHash,
    'x-amz-date': amzDate,
  };
  // fetch sends Host from the URL; it must be signed with the exact value sent.
  const signed: Record<string, string> = { host: req.url.host };
  for (const [k, v] of Object.entries(headers)) signed[k.toLowerCase()] = v.trim().replace(/\s+/g, ' ');
  const names = Object.keys(signed).sort();
  const signedHeaders = names.join(';');
  const canonicalRequest = [
    req.method,
    req.url.pathname,
    '', // no query string
    names.map((n) => `${n}:${signed[n]}\n`).join(''),
    signedHeaders,
    req.payloadHash,
  ].join('\n');
  const scope = `${date}/${cfg.region}/s3/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256(canonicalRequest)].join('\n');
  const key = hmac(hmac(hmac(hmac(`AWS4${cfg.secretAccessKey}`, date), cfg.region), 's3'), 'aws4_request');
  const signature = createHmac('sha256', key).update(stringToSign).digest('hex');
  headers.authorization = `AWS4-HMAC-SHA256 Credential=${cfg.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`;
  return headers;
}

export function objectUrl(cfg: Pick<S3Config, 'endpoint' | 'bucket' | 'forcePathStyle'>, key: string): URL {
  const base = new URL(cfg.endpoint);
  const prefix = base.pathname.replace(/\/+$/, '');
  if (cfg.forcePathStyle) return new URL(`${base.origin}${prefix}${encodePath(`/${cfg.bucket}/${key}`)}`);
  return new URL(`${base.protocol}//${cfg.bucket}.${base.host}${prefix}${encodePath(`/${key}`)}`);
}

const TIMEOUT_MS = 30_000;
/** DELETEs in flight at once when a deleted project's images go. */
const DELETE_CONCURRENCY = 8;

async function failure(op: string, key: string, res: Response): Promise<Error> {
  const body = (await res.text().catch(() => '')).slice(0, 300);
  const code = /<Code>([^<]+)<\/Code>/.exec(body)?.[1];
  return new Error(`S3 ${op} ${key} failed: HTTP ${res.status}${code ? ` ${code}` : ''}`);
}

export function createS3Storage(cfg: S3Config, now: () => Date = () => new Date()): UploadStorage {
  async function deleteObject(key: string): Promise<void> {
    const url = objectUrl(cfg, key);
    const headers = signV4(cfg, { method: 'DELETE', url, headers: {}, payloadHash: sha256(''), now: now() });
    const res = await fetch(url, { method: 'DELETE', headers, signal: AbortSignal.timeout(TIMEOUT_MS) });
    // S3 answers 204 whether or not the key existed; some compatible stores answer 404 for a missing one.
    if (!res.ok && res.status !== 404) throw await failure('DELETE', key, res);
    await res.arrayBuffer();
  }

  return {
    async put(key, bytes, contentType) {
      const url = objectUrl(cfg, key);
      const headers = signV4(cfg, {
        method: 'PUT',
        url,
        headers: { 'content-type': contentType },
        payloadHash: sha256(bytes),
        now: now(),
      });
      const res = await fetch(url, { method: 'PUT', headers, body: new Uint8Array(bytes), signal: AbortSignal.timeout(TIMEOUT_MS) });
      if (!res.ok) throw await failure('PUT', key, res);
      await res.arrayBuffer();
    },
    async get(key) {
      const url = objectUrl(cfg, key);
      const headers = signV4(cfg, { method: 'GET', url, headers: {}, payloadHash: sha256(''), now: now() });
      // The limit is on the bucket's answering; the body then goes to the client at the client's pace.
      const answered = new AbortController();
      const timer = setTimeout(() => answered.abort(new Error(`S3 GET ${key} timed out`)), TIMEOUT_MS);
      const res = await fetch(url, { headers, signal: answered.signal }).finally(() => clearTimeout(timer));
      if (res.status === 404) {
        await res.arrayBuffer();
        return null;
      }
      if (!res.ok) throw await failure('GET', key, res);
      const size = Number(res.headers.get('content-length'));
      if (!res.body || !Number.isSafeInteger(size)) throw new Error(`S3 GET ${key} failed: no content-length`);
      return { body: Readable.fromWeb(res.body), size, contentType: res.headers.get('content-type') ?? 'application/octet-stream' };
    },
    delete: deleteObject,
    async deleteProject(_projectId, keys) {
      // Every key is tried; the failures are reported together once all have been.
      const failures: unknown[] = [];
      let next = 0;
      const worker = async () => {
        while (next < keys.length) await deleteObject(keys[next++]).catch((err: unknown) => failures.push(err));
      };
      await Promise.all(Array.from({ length: Math.min(DELETE_CONCURRENCY, keys.length) }, worker));
      if (failures.length > 0) throw new AggregateError(failures, `S3 DELETE failed for ${failures.length} of ${keys.length} images`);
    },
    async hasRoomFor() {
      return true; // the bucket is not on Herald's disk
    },
  };
}
