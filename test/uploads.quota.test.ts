import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readdir, statfs } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import type { Api, Res } from './helpers/http.ts';
import { joinWithInvitation } from './helpers/invitations.ts';
import { holdLock } from './helpers/locks.ts';
import { waitFor } from './helpers/workflows.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { asMember, signupUser } from './helpers/team.ts';

/**
 * The per-project upload quota (UPLOAD_QUOTA_MB, 10,000 images), the disk floor (UPLOAD_MIN_FREE_MB),
 * and the list and delete that let a project stay within them.
 */

const KB = 1024;
const MB = 1024 * KB;
const QUOTA = 1 * MB;
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');

/** A PNG (by its magic bytes) of exactly `size` bytes. */
const pngOf = (size: number) => Buffer.concat([PNG, Buffer.alloc(size - PNG.length, 0x42)]);

function form(bytes: Buffer): FormData {
  const fd = new FormData();
  fd.append('file', new Blob([new Uint8Array(bytes)], { type: 'image/png' }), 'image.png');
  return fd;
}

const upload = (api: Api, bytes: Buffer) => api.request('POST', '/uploads/image', { raw: form(bytes) });

let server: TestServer;
let uploadsDir: string;

before(async () => {
  server = await startTestServer({ UPLOAD_QUOTA_MB: '1', API_RATE_LIMIT_PER_MINUTE: '100000' });
  uploadsDir = path.join(server.ctx.config.dataDir, 'uploads');
});
after(async () => server?.stop());

const filesOf = async (projectId: string, dir = uploadsDir) => {
  const projectDir = path.join(dir, projectId);
  return existsSync(projectDir) ? (await readdir(projectDir)).sort() : [];
};
const fileName = (key: string) => key.slice(key.indexOf('/') + 1);
/** Connections to the test database waiting for a lock. */
const waitingBackends = async () =>
  (
    await server.sql<{ n: number }>(
      `SELECT count(DISTINCT l.pid)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted AND a.datname = current_database()`,
    )
  )[0].n;
const servedStatus = async (key: string) => (await fetch(`${server.url}/uploads/${key}`)).status;

describe('the upload quota', () => {
  test('two 600 KB images in a 1 MB quota: the second is refused and nothing written; after deleting the first it fits', async () => {
    const b = await bootstrap(server.api, 'Quota');
    const first = await upload(b.sk, pngOf(600 * KB));
    assert.equal(first.status, 201, first.text);

    const second = await upload(b.sk, pngOf(600 * KB));
    assert.equal(second.status, 403, second.text);
    assert.equal(second.body.error.code, 'FORBIDDEN');
    assert.deepEqual(second.body.error.details, { limit: QUOTA });
    assert.equal(
      second.body.error.message,
      "This image (0.6 MB) does not fit: the project's images use 0.6 MB of its 1 MB upload quota. " +
        'Delete images (DELETE /uploads/<key>), or ask the operator to raise UPLOAD_QUOTA_MB',
    );
    assert.deepEqual(await filesOf(b.project.id), [fileName(first.body.key)]);
    const listed = await b.sk.get('/uploads');
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(
      listed.body.data.map((u: { key: string }) => u.key),
      [first.body.key],
    );
    assert.deepEqual(listed.body.usage, { bytes: 600 * KB, files: 1, quotaBytes: QUOTA, maxFiles: 10_000 });

    const deleted = await b.sk.request('DELETE', `/uploads/${first.body.key}`);
    assert.equal(deleted.status, 204, deleted.text);
    assert.equal(await servedStatus(first.body.key), 404);
    assert.deepEqual(await filesOf(b.project.id), []);

    const again = await upload(b.sk, pngOf(600 * KB));
    assert.equal(again.status, 201, again.text);
    assert.deepEqual((await b.sk.get('/uploads')).body.usage, { bytes: 600 * KB, files: 1, quotaBytes: QUOTA, maxFiles: 10_000 });
  });

  test('ten concurrent 300 KB uploads into a 1 MB quota: exactly three are stored', async () => {
    const b = await bootstrap(server.api, 'Concurrent');
    // The project row held: each upload's insert waits on it (its foreign key), so all ten are in
    // flight together when it is released, however the requests happened to arrive.
    const project = await holdLock(server.databaseUrl, 'SELECT 1 FROM projects WHERE id = $1 FOR UPDATE', [b.project.id]);
    const pending: Promise<Res[]> = Promise.all(Array.from({ length: 10 }, () => upload(b.sk, pngOf(300 * KB))));
    try {
      await waitFor('ten uploads waiting in the database', async () => (await waitingBackends()) >= 10, 20_000);
    } finally {
      await project.release();
    }
    const answers = await pending;
    const statuses = answers.map((r) => r.status).sort();
    assert.deepEqual(statuses, [201, 201, 201, 403, 403, 403, 403, 403, 403, 403]);
    const stored = answers.filter((r) => r.status === 201).map((r) => r.body.key as string);
    assert.deepEqual(await filesOf(b.project.id), stored.map(fileName).sort());
    const listed = await b.sk.get('/uploads');
    assert.equal(listed.body.total, 3);
    assert.deepEqual(listed.body.usage, { bytes: 900 * KB, files: 3, quotaBytes: QUOTA, maxFiles: 10_000 });
  });

  test("another project has its own quota, and can neither list nor delete the first's images", async () => {
    const full = await bootstrap(server.api, 'Full');
    const image = await upload(full.sk, pngOf(900 * KB));
    assert.equal(image.status, 201, image.text);
    assert.equal((await upload(full.sk, pngOf(200 * KB))).status, 403);

    const other = await bootstrap(server.api, 'Other');
    const own = await upload(other.sk, pngOf(900 * KB));
    assert.equal(own.status, 201, own.text);
    const listed = await other.sk.get('/uploads');
    assert.deepEqual(
      listed.body.data.map((u: { key: string }) => u.key),
      [own.body.key],
    );
    assert.deepEqual(listed.body.usage, { bytes: 900 * KB, files: 1, quotaBytes: QUOTA, maxFiles: 10_000 });

    const foreign = await other.sk.request('DELETE', `/uploads/${image.body.key}`);
    assert.equal(foreign.status, 404);
    assert.equal(foreign.body.error.code, 'UPLOAD_NOT_FOUND');
    assert.deepEqual(foreign.body.error.details, { resource: 'upload', id: image.body.key });
    // Unchanged: still stored, served and counted.
    assert.equal(await servedStatus(image.body.key), 200);
    assert.deepEqual(await filesOf(full.project.id), [fileName(image.body.key)]);
    assert.equal((await full.sk.get('/uploads')).body.usage.bytes, 900 * KB);

    const unknown = await other.sk.request('DELETE', `/uploads/${other.project.id}/01900000-0000-7000-8000-000000000000.png`);
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error.code, 'UPLOAD_NOT_FOUND');
    assert.equal((await other.sk.request('DELETE', '/uploads/..%2Fjwt-secret')).status, 404);
  });

  test('at most 10,000 images a project, however small', async () => {
    const b = await bootstrap(server.api, 'Many');
    await server.sql(
      `INSERT INTO uploads (key, project_id, size, content_type)
       SELECT $1 || '/' || gen_random_uuid() || '.png', $1, 10, 'image/png' FROM generate_series(1, 10000)`,
      [b.project.id],
    );
    const res = await upload(b.sk, PNG);
    assert.equal(res.status, 403, res.text);
    assert.equal(res.body.error.code, 'FORBIDDEN');
    assert.deepEqual(res.body.error.details, { limit: 10_000 });
    assert.equal(
      res.body.error.message,
      'A project can keep at most 10,000 uploaded images and this one has 10,000; delete images first (DELETE /uploads/<key>)',
    );
    assert.deepEqual(await filesOf(b.project.id), []);
    assert.deepEqual((await b.sk.get('/uploads?limit=1')).body.usage, { bytes: 100_000, files: 10_000, quotaBytes: QUOTA, maxFiles: 10_000 });
  });
});

describe('GET /uploads', () => {
  test('newest first, cursor-paged, total on the first page, with the usage figures', async () => {
    const b = await bootstrap(server.api, 'Paging');
    const keys: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await upload(b.sk, pngOf(1000 + i));
      assert.equal(res.status, 201, res.text);
      keys.push(res.body.key);
    }
    const newestFirst = [...keys].reverse();
    const usage = { bytes: 5 * 1000 + 10, files: 5, quotaBytes: QUOTA, maxFiles: 10_000 };

    const page1 = await b.sk.get('/uploads?limit=2');
    assert.equal(page1.status, 200, page1.text);
    assert.deepEqual(Object.keys(page1.body).sort(), ['cursor', 'data', 'hasMore', 'total', 'usage']);
    assert.equal(page1.body.total, 5);
    assert.equal(page1.body.hasMore, true);
    assert.deepEqual(page1.body.usage, usage);
    const first = page1.body.data[0];
    assert.deepEqual(Object.keys(first).sort(), ['contentType', 'createdAt', 'key', 'size', 'url']);
    assert.equal(first.key, newestFirst[0]);
    assert.equal(first.url, `${server.ctx.config.publicUrl}/uploads/${newestFirst[0]}`);
    assert.equal(first.contentType, 'image/png');
    assert.equal(first.size, 1004);
    assert.ok(Math.abs(Date.parse(first.createdAt) - Date.now()) < 60_000, first.createdAt);

    const page2 = await b.sk.get(`/uploads?limit=2&cursor=${page1.body.cursor}`);
    assert.equal(page2.body.total, 0);
    assert.equal(page2.body.hasMore, true);
    const page3 = await b.sk.get(`/uploads?limit=2&cursor=${page2.body.cursor}`);
    assert.equal(page3.body.hasMore, false);
    assert.equal(page3.body.cursor, undefined);
    assert.deepEqual(
      [...page1.body.data, ...page2.body.data, ...page3.body.data].map((u: { key: string; size: number }) => [u.key, u.size]),
      newestFirst.map((key, i) => [key, 1004 - i]),
    );

    const bad = await b.sk.get('/uploads?cursor=nonsense');
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.message, 'Invalid cursor');
  });

  test('a MEMBER lists the project uploads; listing needs a secret key or a session', async () => {
    const b = await bootstrap(server.api, 'Team');
    const image = await upload(b.sk, PNG);
    const member = await signupUser(server.api);
    await joinWithInvitation(
      server,
      await server.api.post(`/projects/${b.project.id}/members`, { email: member.email, role: 'MEMBER' }, { cookie: b.cookie }),
      member.cookie,
    );
    const listed = await asMember(server.api, member.cookie, b.project.id).get('/uploads');
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(
      listed.body.data.map((u: { key: string }) => u.key),
      [image.body.key],
    );
    assert.equal((await server.api.get('/uploads')).status, 401);
    assert.equal((await b.pk.get('/uploads')).status, 401);
  });

  test('a MEMBER deletes an image, as they may upload one', async () => {
    const b = await bootstrap(server.api, 'Team delete');
    const member = await signupUser(server.api);
    await joinWithInvitation(
      server,
      await server.api.post(`/projects/${b.project.id}/members`, { email: member.email, role: 'MEMBER' }, { cookie: b.cookie }),
      member.cookie,
    );
    const asIt = asMember(server.api, member.cookie, b.project.id);
    const image = await upload(asIt, PNG);
    assert.equal(image.status, 201, image.text);
    const deleted = await asIt.request('DELETE', `/uploads/${image.body.key}`);
    assert.equal(deleted.status, 204, deleted.text);
    assert.equal(await servedStatus(image.body.key), 404);
  });
});

describe('deleting a project', () => {
  test("removes its images from disk, including its folder; other projects' stay", async () => {
    const doomed = await bootstrap(server.api, 'Doomed');
    const kept = await bootstrap(server.api, 'Kept');
    const images = [await upload(doomed.sk, PNG), await upload(doomed.sk, pngOf(2000))].map((r) => r.body.key as string);
    const keptImage = (await upload(kept.sk, PNG)).body.key as string;
    assert.equal((await filesOf(doomed.project.id)).length, 2);

    const res = await server.api.request('DELETE', `/users/@me/projects/${doomed.project.id}`, { cookie: doomed.cookie });
    assert.equal(res.status, 204, res.text);
    assert.equal(existsSync(path.join(uploadsDir, doomed.project.id)), false);
    for (const key of images) assert.equal(await servedStatus(key), 404);
    assert.equal(await servedStatus(keptImage), 200);
    assert.deepEqual(await server.sql('SELECT key FROM uploads WHERE project_id = $1', [doomed.project.id]), []);
  });
});

describe('the disk floor', () => {
  test('UPLOAD_MIN_FREE_MB above the free space: 507 and nothing written', async () => {
    const disk = await statfs(server.ctx.config.dataDir);
    const moreThanTheDisk = Math.ceil((disk.blocks * disk.bsize) / MB) + 1;
    const tight = await startTestServer({ UPLOAD_MIN_FREE_MB: String(moreThanTheDisk) });
    try {
      const b = await bootstrap(tight.api, 'Full disk');
      const res = await upload(b.sk, PNG);
      assert.equal(res.status, 507, res.text);
      assert.equal(res.body.error.code, 'INSUFFICIENT_STORAGE');
      assert.equal(res.body.error.message, "The server's disk is nearly full; uploads are paused");
      assert.deepEqual(await filesOf(b.project.id, path.join(tight.ctx.config.dataDir, 'uploads')), []);
      const listed = await b.sk.get('/uploads');
      assert.deepEqual(listed.body.data, []);
      assert.equal(listed.body.usage.files, 0);
    } finally {
      await tight.stop();
    }
  });
});
