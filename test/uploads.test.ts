import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readFile, readdir, readlink, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { Api } from './helpers/http.ts';
import { waitFor } from './helpers/workflows.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

const PUBLIC_URL = 'https://cdn.herald.test';
const MB = 1024 * 1024;

// Real 1×1 images.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');
const GIF = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');
const WEBP = Buffer.from('UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==', 'base64');
const JPEG = Buffer.concat([
  Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10]),
  Buffer.from('JFIF\0', 'latin1'),
  Buffer.alloc(64, 0x11),
  Buffer.from([0xff, 0xd9]),
]);
const HTML = Buffer.from('<!doctype html><html><body><script>alert(document.cookie)</script></body></html>');
const SVG = Buffer.from('<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"><script>alert(1)</script></svg>');

const KEY = /^prj_[0-9a-f]{32}\/[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.(jpg|png|gif|webp)$/;

function form(bytes: Buffer, filename: string, type = 'application/octet-stream', field = 'file'): FormData {
  const fd = new FormData();
  fd.append(field, new Blob([new Uint8Array(bytes)], { type }), filename);
  return fd;
}

const upload = (api: Api, fd: FormData) => api.request('POST', '/uploads/image', { raw: fd });

let server: TestServer;
let b: Bootstrapped;
let uploadsDir: string;

before(async () => {
  server = await startTestServer({ PUBLIC_URL });
  b = await bootstrap(server.api);
  uploadsDir = path.join(server.ctx.config.dataDir, 'uploads');
});
after(async () => server?.stop());

const filesOf = async (projectId: string) => {
  const dir = path.join(uploadsDir, projectId);
  return existsSync(dir) ? (await readdir(dir)).sort() : [];
};

describe('POST /uploads/image', () => {
  test('a PNG named .exe is recognised by its bytes, stored and served publicly', async () => {
    const res = await upload(b.sk, form(PNG, 'photo.exe'));
    assert.equal(res.status, 201, res.text);
    assert.deepEqual(Object.keys(res.body).sort(), ['contentType', 'key', 'size', 'url']);
    assert.equal(res.body.contentType, 'image/png');
    assert.equal(res.body.size, PNG.length);
    assert.match(res.body.key, KEY);
    assert.ok(res.body.key.startsWith(`${b.project.id}/`));
    assert.ok(res.body.key.endsWith('.png'));
    assert.equal(res.body.url, `${PUBLIC_URL}/uploads/${res.body.key}`);

    const onDisk = await readFile(path.join(uploadsDir, res.body.key));
    assert.deepEqual(onDisk, PNG);

    const served = await fetch(`${server.url}/uploads/${res.body.key}`);
    assert.equal(served.status, 200);
    assert.equal(served.headers.get('content-type'), 'image/png');
    assert.equal(served.headers.get('content-length'), String(PNG.length));
    assert.equal(served.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    assert.equal(served.headers.get('x-content-type-options'), 'nosniff');
    assert.deepEqual(Buffer.from(await served.arrayBuffer()), PNG);
  });

  test('JPEG, GIF and WebP are recognised whatever the name and declared type', async () => {
    const cases: [Buffer, string, string][] = [
      [JPEG, 'image/jpeg', 'jpg'],
      [GIF, 'image/gif', 'gif'],
      [WEBP, 'image/webp', 'webp'],
    ];
    for (const [bytes, contentType, ext] of cases) {
      const res = await upload(b.sk, form(bytes, 'upload.txt', 'text/plain'));
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.contentType, contentType);
      assert.equal(res.body.size, bytes.length);
      assert.ok(res.body.key.endsWith(`.${ext}`), res.body.key);
      const served = await fetch(`${server.url}/uploads/${res.body.key}`);
      assert.equal(served.headers.get('content-type'), contentType);
      assert.deepEqual(Buffer.from(await served.arrayBuffer()), bytes);
    }
  });

  test('the dashboard session with X-Project-Id uploads into that project', async () => {
    const res = await upload(server.api.as({ cookie: b.cookie, headers: { 'x-project-id': b.project.id } }), form(GIF, 'pixel.gif', 'image/gif'));
    assert.equal(res.status, 201, res.text);
    assert.ok(res.body.key.startsWith(`${b.project.id}/`));
  });

  test('an HTML file renamed .png is refused with 415 and nothing is stored', async () => {
    const other = await bootstrap(server.api, 'HTML');
    const res = await upload(other.sk, form(HTML, 'innocent.png', 'image/png'));
    assert.equal(res.status, 415);
    assert.equal(res.body.error.code, 'UNSUPPORTED_MEDIA_TYPE');
    assert.equal(res.body.error.message, 'File is not a JPEG, PNG, GIF or WebP image');
    assert.deepEqual(res.body.error.details.accepted, ['image/jpeg', 'image/png', 'image/gif', 'image/webp']);
    assert.deepEqual(await filesOf(other.project.id), []);
  });

  test('an SVG is refused because it can carry scripts', async () => {
    const res = await upload(b.sk, form(SVG, 'logo.svg', 'image/svg+xml'));
    assert.equal(res.status, 415);
    assert.equal(res.body.error.code, 'UNSUPPORTED_MEDIA_TYPE');
    assert.match(res.body.error.message, /^SVG images are not accepted because they can contain scripts/);
  });

  test('an empty file is a 422 on field file', async () => {
    const res = await upload(b.sk, form(Buffer.alloc(0), 'empty.png', 'image/png'));
    assert.equal(res.status, 422);
    assert.equal(res.body.error.code, 'VALIDATION_ERROR');
    assert.deepEqual(res.body.error.errors, [{ field: 'file', message: 'File is empty', code: 'too_small' }]);
  });

  test('exactly 10 MB is accepted; one byte more is a 413 and nothing is stored', async () => {
    const exact = Buffer.concat([PNG, Buffer.alloc(10 * MB - PNG.length, 0x42)]);
    const ok = await upload(b.sk, form(exact, 'big.png', 'image/png'));
    assert.equal(ok.status, 201, ok.text);
    assert.equal(ok.body.size, 10 * MB);

    const other = await bootstrap(server.api, 'Too big');
    const tooBig = await upload(other.sk, form(Buffer.concat([exact, Buffer.from([0x42])]), 'big.png', 'image/png'));
    assert.equal(tooBig.status, 413);
    assert.equal(tooBig.body.error.code, 'PAYLOAD_TOO_LARGE');
    assert.equal(tooBig.body.error.message, 'Uploaded file is too large');
    const wayTooBig = await upload(other.sk, form(Buffer.concat([exact, Buffer.alloc(2 * MB)]), 'big.png', 'image/png'));
    assert.equal(wayTooBig.status, 413);
    assert.equal(wayTooBig.body.error.code, 'PAYLOAD_TOO_LARGE');
    assert.deepEqual(await filesOf(other.project.id), []);
  });

  test('a form without a "file" part is a 422; a JSON body is a 400', async () => {
    const fd = new FormData();
    fd.append('name', 'no file here');
    const noFile = await upload(b.sk, fd);
    assert.equal(noFile.status, 422);
    assert.equal(noFile.body.error.errors[0].field, 'file');
    assert.equal(noFile.body.error.errors[0].code, 'invalid_type');

    const wrongField = await upload(b.sk, form(PNG, 'a.png', 'image/png', 'image'));
    assert.equal(wrongField.status, 422);
    assert.equal(wrongField.body.error.errors[0].field, 'file');

    const json = await b.sk.post('/uploads/image', { file: PNG.toString('base64') });
    assert.equal(json.status, 400);
    assert.equal(json.body.error.code, 'BAD_REQUEST');
    assert.equal(json.body.error.message, 'Request must be multipart/form-data');

    // A body the multipart parser cannot read is the client's fault: 400, not 500.
    const cutOff = '--b\r\nContent-Disposition: form-data; name="file"; filename="a.gif"\r\n\r\nGIF89a';
    for (const [contentType, raw, reason] of [
      ['multipart/form-data', 'x', 'Boundary not found'],
      ['multipart/form-data; boundary=b', cutOff, 'Part terminated early'],
    ]) {
      for (const path of ['/uploads/image', '/contacts/import']) {
        const res = await b.sk.request('POST', path, { raw, headers: { 'content-type': contentType } });
        assert.equal(res.status, 400, `${path} ${contentType}: ${res.text}`);
        assert.equal(res.body.error.code, 'BAD_REQUEST');
        assert.match(res.body.error.message, new RegExp(`^The multipart body is malformed: .*${reason}`));
      }
    }
  });

  test('uploading needs a secret key or a session', async () => {
    const anonymous = await upload(server.api, form(PNG, 'a.png'));
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.body.error.code, 'INVALID_API_KEY');
    const publicKey = await upload(b.pk, form(PNG, 'a.png'));
    assert.equal(publicKey.status, 401);
    assert.equal(publicKey.body.error.code, 'INVALID_API_KEY');
  });
});

describe('GET /uploads/:key', () => {
  test('an image is sent as the client reads it: forty clients that never read hold no copies, and their files close', async () => {
    const image = Buffer.concat([JPEG.subarray(0, 16), Buffer.alloc(10 * MB - 16, 0x5a)]);
    const up = await upload(b.sk, form(image, 'big.jpg'));
    assert.equal(up.status, 201, up.text);
    const full = await fetch(up.body.url.replace(PUBLIC_URL, server.url));
    assert.equal(full.headers.get('content-length'), String(10 * MB));
    assert.ok(Buffer.from(await full.arrayBuffer()).equals(image));

    // This process's open files under the uploads folder (other descriptors, such as database connections, come and go).
    const openImages = async () => {
      const targets = await Promise.all((await readdir('/proc/self/fd')).map((fd) => readlink(`/proc/self/fd/${fd}`).catch(() => '')));
      return targets.filter((target) => target.startsWith(uploadsDir)).length;
    };
    // Live buffers only: the chunks already handed to the kernel are garbage, counted until a GC
    // happens to run (a quiet process runs fewer: 45 MB was once measured that way).
    setFlagsFromString('--expose-gc');
    const v8gc = runInNewContext('gc') as () => void;
    // Twice: an ArrayBuffer's memory goes back once the object is collected, which one cycle may leave to the next.
    const gc = () => {
      v8gc();
      v8gc();
    };
    gc();
    const buffersBefore = process.memoryUsage().arrayBuffers;
    const { port } = new URL(server.url);
    const sockets = Array.from({ length: 40 }, () => {
      const socket = net.connect(Number(port), '127.0.0.1');
      socket.pause(); // never reads: whatever the server has not sent waits on its side
      socket.write(`GET ${new URL(up.body.url).pathname} HTTP/1.1\r\nHost: x\r\n\r\n`);
      return socket;
    });
    try {
      await new Promise((r) => setTimeout(r, 1500));
      gc();
      // Read whole, each held the 10 MB image: 400 MB. Streamed, each holds a chunk or two.
      const held = process.memoryUsage().arrayBuffers - buffersBefore;
      assert.ok(held < 40 * MB, `${(held / MB).toFixed(0)} MB held for 40 unread answers`);
      assert.ok((await openImages()) > 0, 'the unread answers are streamed from their open file');
    } finally {
      // Also when an assertion fails: an open, unread answer would hold the server's stop for good.
      for (const socket of sockets) socket.destroy();
    }
    await waitFor('the image files of the abandoned answers to close', async () => (await openImages()) === 0, 5_000);
  });

  test('an unknown key is a 404 in the error shape', async () => {
    const key = `${b.project.id}/01900000-0000-7000-8000-000000000000.png`;
    const res = await server.api.get(`/uploads/${key}`);
    assert.equal(res.status, 404);
    assert.equal(res.body.success, false);
    assert.equal(res.body.error.code, 'UPLOAD_NOT_FOUND');
    assert.deepEqual(res.body.error.details, { resource: 'upload', id: key });
  });

  test('path traversal and foreign shapes are 404, never a file outside the uploads folder', async () => {
    // A file next to uploads/ in DATA_DIR: none of these may reach it.
    await writeFile(path.join(server.ctx.config.dataDir, 'jwt-secret'), 'do-not-serve');
    const attempts = [
      '/uploads/..%2Fjwt-secret',
      '/uploads/..%2F..%2Fetc%2Fpasswd',
      `/uploads/${b.project.id}%2F..%2F..%2Fjwt-secret`,
      `/uploads/${b.project.id}/..%2F..%2Fjwt-secret`,
      '/uploads/%2Fetc%2Fpasswd',
      `/uploads/${b.project.id}/01900000-0000-7000-8000-000000000000.svg`,
      `/uploads/${b.project.id}/01900000-0000-7000-8000-000000000000.png.tmp`,
      '/uploads/',
    ];
    for (const url of attempts) {
      const res = await server.api.get(url);
      assert.equal(res.status, 404, url);
      assert.equal(res.body.success, false, url);
      assert.ok(!res.text.includes('do-not-serve'), url);
    }
  });
});
