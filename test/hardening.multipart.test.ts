import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/** Issue 14 finding 4: multipart routes take one file part; extra fields and parts are refused, never buffered. */

let server: TestServer;
let b: Bootstrapped;

before(async () => {
  server = await startTestServer();
  b = await bootstrap(server.api);
});
after(async () => {
  await server?.stop();
});

const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64');

function formWithFields(fields: number, fieldBytes: number, file: { name: string; content: Buffer | string; type: string }): FormData {
  const fd = new FormData();
  const value = 'x'.repeat(fieldBytes);
  for (let i = 0; i < fields; i++) fd.append(`f${i}`, value);
  fd.append('file', new Blob([file.content], { type: file.type }), file.name);
  return fd;
}

describe('multipart limits', () => {
  for (const [path, file] of [
    ['/contacts/import', { name: 'c.csv', content: 'email\na@example.com\n', type: 'text/csv' }],
    ['/uploads/image', { name: 'p.png', content: PNG, type: 'image/png' }],
  ] as const) {
    test(`${path}: 200 fields of 64 KB before the file are 413, nothing is imported or stored`, async () => {
      const before = (await b.sk.get('/contacts')).body.data.length;
      const res = await b.sk.request('POST', path, { raw: formWithFields(200, 64 * 1024, file) });
      assert.equal(res.status, 413, res.text);
      assert.equal(res.body.error.code, 'PAYLOAD_TOO_LARGE');
      assert.match(res.body.error.message, /Too many multipart parts/);
      if (path === '/contacts/import') assert.equal((await b.sk.get('/contacts')).body.data.length, before);
    });

    test(`${path}: four small fields before the file are refused too`, async () => {
      const res = await b.sk.request('POST', path, { raw: formWithFields(4, 10, file) });
      assert.equal(res.status, 413, res.text);
    });

    test(`${path}: a second file part is 413 and nothing is imported or stored`, async () => {
      const other = await bootstrap(server.api, `two-files-${path}`);
      const fd = formWithFields(0, 0, file);
      fd.append('file', new Blob([path === '/contacts/import' ? 'email\nb@example.com\n' : PNG], { type: file.type }), `second-${file.name}`);
      const res = await other.sk.request('POST', path, { raw: fd });
      assert.equal(res.status, 413, res.text);
      assert.equal(res.body.error.code, 'PAYLOAD_TOO_LARGE');
      assert.match(res.body.error.message, /Too many multipart parts/);
      const jobs = await server.sql<{ n: number }>('SELECT count(*)::int AS n FROM import_jobs WHERE project_id = $1', [other.project.id]);
      assert.equal(jobs[0].n, 0);
      const uploads = await server.sql<{ n: number }>('SELECT count(*)::int AS n FROM uploads WHERE project_id = $1', [other.project.id]);
      assert.equal(uploads[0].n, 0);
    });

    test(`${path}: the file alone is accepted`, async () => {
      const res = await b.sk.request('POST', path, { raw: formWithFields(0, 0, file) });
      assert.ok(res.status === 201 || res.status === 202, res.text);
    });
  }
});
