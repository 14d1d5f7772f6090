import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { stallDuring } from './helpers/event-loop.ts';
import type { Api } from './helpers/http.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { IMPORT_QUEUE } from '../src/modules/contacts/import/service.ts';

const MB = 1024 * 1024;
const IMP_ID = /^imp_[0-9a-f]{32}$/;

let server: TestServer;
let b: Bootstrapped;

before(async () => {
  server = await startTestServer({ API_RATE_LIMIT_PER_MINUTE: '100000' });
  b = await bootstrap(server.api);
});
after(async () => server?.stop());

function form(content: string | Buffer, filename = 'contacts.csv', field = 'file'): FormData {
  const bytes = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  const fd = new FormData();
  fd.append(field, new Blob([new Uint8Array(bytes)], { type: 'text/csv' }), filename);
  return fd;
}

const upload = (api: Api, content: string | Buffer, filename?: string) => api.request('POST', '/contacts/import', { raw: form(content, filename) });

type Job = {
  jobId: string;
  type: string;
  status: string;
  fileName: string | null;
  totalRows: number;
  processedRows: number;
  imported: number;
  updated: number;
  skipped: number;
  errors: { row: number; email: string; reason: string }[];
  errorCount: number;
  failureReason?: string;
  createdAt: string;
  completedAt: string | null;
};

/** Polls the job until it is completed or failed; `seen` collects every state observed. */
async function waitForJob(api: Api, jobId: string, seen: Job[] = [], timeoutMs = 60_000): Promise<Job> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const res = await api.get<Job>(`/contacts/import/${jobId}`);
    assert.equal(res.status, 200, res.text);
    seen.push(res.body);
    if (res.body.status === 'completed' || res.body.status === 'failed') return res.body;
    await sleep(20);
  }
  throw new Error(`import ${jobId} did not finish`);
}

/** Uploads, expects 202 and waits for the end. */
async function importCsv(api: Api, content: string | Buffer, filename?: string): Promise<Job> {
  const res = await upload(api, content, filename);
  assert.equal(res.status, 202, res.text);
  assert.deepEqual(Object.keys(res.body).sort(), ['jobId', 'status']);
  assert.equal(res.body.status, 'queued');
  assert.match(res.body.jobId, IMP_ID);
  return waitForJob(api, res.body.jobId);
}

async function contactByEmail(api: Api, email: string) {
  const found = await api.post('/contacts/lookup', { emails: [email] });
  assert.equal(found.status, 200, found.text);
  assert.equal(found.body.found.length, 1, `${email} exists`);
  const res = await api.get(`/contacts/${found.body.found[0].id}`);
  assert.equal(res.status, 200);
  return res.body;
}

async function fieldTypes(api: Api): Promise<Record<string, string>> {
  const res = await api.get<{ fields: { field: string; type: string }[] }>('/contacts/fields');
  assert.equal(res.status, 200);
  return Object.fromEntries(res.body.fields.map((f) => [f.field, f.type]));
}

const contactCount = async (projectId: string) =>
  (await server.sql<{ n: number }>('SELECT count(*)::int AS n FROM contacts WHERE project_id = $1', [projectId]))[0].n;

const jobCount = async (projectId: string) =>
  (await server.sql<{ n: number }>('SELECT count(*)::int AS n FROM import_jobs WHERE project_id = $1', [projectId]))[0].n;

describe('POST /contacts/import: a clean file', () => {
  test('every column becomes data.<column>, coerced per the spec, and the job reports its counts', async () => {
    const p = await bootstrap(server.api, 'coercion');
    const csv = [
      'Email,First Name,plan,age,score,delta,active,vip,joined,login,zip,phone,exp,big,formula,id,Subscribed,createdAt,updatedAt,unsubscribeUrl',
      'Ada@Example.com,Ada,pro,36,9.5,-0.25,TRUE,No,2024-05-01,2024-05-01T10:00:00Z,02134,+15551234567,1e5,123456789012345678,"=HYPERLINK(""http://evil.example"",""click"")",cnt_fake,false,2020-01-01,2020-01-01,http://x',
      'grace@example.com,Grace,free,0,10.0,-3,yes,false,2024-02-30,2024-05-01T10:00:00+02:00,007,5551234,1.5E3,42,=1+2,,,,,',
    ].join('\n');
    const job = await importCsv(p.sk, csv, 'people.csv');
    assert.equal(job.status, 'completed');
    assert.equal(job.type, 'import');
    assert.equal(job.fileName, 'people.csv');
    assert.equal(job.totalRows, 2);
    assert.equal(job.processedRows, 2);
    assert.equal(job.imported, 2);
    assert.equal(job.updated, 0);
    assert.equal(job.skipped, 0);
    assert.deepEqual(job.errors, []);
    assert.equal(job.errorCount, 0);
    assert.equal(job.failureReason, undefined);
    assert.ok(Date.parse(job.completedAt!) >= Date.parse(job.createdAt));

    const ada = await contactByEmail(p.sk, 'ada@example.com');
    assert.equal(ada.email, 'ada@example.com');
    assert.equal(ada.subscribed, true, 'imported contacts are created subscribed (the subscribed column is filtered)');
    assert.match(ada.id, /^cnt_[0-9a-f]{32}$/);
    assert.notEqual(ada.id, 'cnt_fake');
    assert.deepEqual(ada.data, {
      'First Name': 'Ada',
      plan: 'pro',
      age: 36,
      score: 9.5,
      delta: -0.25,
      active: true,
      vip: false,
      joined: '2024-05-01',
      login: '2024-05-01T10:00:00Z',
      zip: '02134',
      phone: '+15551234567',
      exp: '1e5',
      big: '123456789012345678',
      formula: '=HYPERLINK("http://evil.example","click")',
    });
    const grace = await contactByEmail(p.sk, 'grace@example.com');
    assert.deepEqual(grace.data, {
      'First Name': 'Grace',
      plan: 'free',
      age: 0,
      score: 10,
      delta: -3,
      active: true,
      vip: false,
      joined: '2024-02-30',
      login: '2024-05-01T10:00:00+02:00',
      zip: '007',
      phone: 5551234,
      exp: '1.5E3',
      big: 42,
      formula: '=1+2',
    });

    const types = await fieldTypes(p.sk);
    assert.deepEqual(types, {
      email: 'string',
      subscribed: 'boolean',
      createdAt: 'date',
      updatedAt: 'date',
      'data.First Name': 'string',
      'data.active': 'boolean',
      'data.age': 'number',
      'data.big': 'string',
      'data.delta': 'number',
      'data.exp': 'string',
      'data.formula': 'string',
      'data.joined': 'date',
      'data.login': 'date',
      'data.phone': 'string',
      'data.plan': 'string',
      'data.score': 'number',
      'data.vip': 'boolean',
      'data.zip': 'string',
    });
  });

  test('BOM, semicolons, CRLF, quoted fields with embedded newlines and delimiters, blank lines', async () => {
    const p = await bootstrap(server.api, 'format');
    const csv =
      '\uFEFFemail;note;city\r\n' +
      'a@example.com;"line one\r\nline two; still the note";Paris\r\n' +
      '\r\n' +
      ';;\r\n' +
      'not-an-email;x;y\r\n' +
      'b@example.com;"say ""hi""";Zürich 🏔️\r\n';
    const job = await importCsv(p.sk, csv);
    assert.equal(job.status, 'completed');
    assert.equal(job.totalRows, 3, 'blank rows are not counted');
    assert.equal(job.imported, 2);
    assert.equal(job.skipped, 1);
    // Row numbers count records (a multi-line cell is one row), blank rows included, header = 1.
    assert.deepEqual(job.errors, [{ row: 5, email: 'not-an-email', reason: 'invalid_email' }]);
    assert.deepEqual((await contactByEmail(p.sk, 'a@example.com')).data, {
      note: 'line one\r\nline two; still the note',
      city: 'Paris',
    });
    assert.deepEqual((await contactByEmail(p.sk, 'b@example.com')).data, { note: 'say "hi"', city: 'Zürich 🏔️' });
  });

  test('a header-only file completes with zero rows', async () => {
    const p = await bootstrap(server.api, 'empty');
    const job = await importCsv(p.sk, 'email,plan\n');
    assert.equal(job.status, 'completed');
    assert.equal(job.totalRows, 0);
    assert.equal(job.imported, 0);
    assert.equal(await contactCount(p.project.id), 0);
  });
});

describe('POST /contacts/import: merging and re-runs', () => {
  test('an existing contact is merged, keeps its subscription and other data; empty cells change nothing', async () => {
    const p = await bootstrap(server.api, 'merge');
    const created = await p.sk.post('/contacts', {
      email: 'Old@Example.com',
      subscribed: false,
      data: { plan: 'free', keep: 'me', city: 'Oslo' },
    });
    assert.equal(created.status, 201);
    const job = await importCsv(p.sk, 'EMAIL,plan,city,seats\nold@example.com,pro,,3\nnew@example.com,free,Rome,\n');
    assert.equal(job.status, 'completed');
    assert.equal(job.imported, 1);
    assert.equal(job.updated, 1);
    assert.equal(job.skipped, 0);
    const old = await contactByEmail(p.sk, 'old@example.com');
    assert.equal(old.id, created.body.id, 'no duplicate: the same contact');
    assert.equal(old.subscribed, false, 'an existing contact keeps its subscription state');
    assert.deepEqual(old.data, { plan: 'pro', keep: 'me', city: 'Oslo', seats: 3 });
    assert.ok(old.updatedAt > created.body.updatedAt);
    assert.deepEqual((await contactByEmail(p.sk, 'new@example.com')).data, { plan: 'free', city: 'Rome' });
    assert.equal(await contactCount(p.project.id), 2);
    const events = await server.sql('SELECT name FROM events WHERE project_id = $1', [p.project.id]);
    assert.deepEqual(events, [], 'an import changes no subscription, so it emits no event');
  });

  test('re-running the same file is idempotent: nothing imported, nothing updated, nothing rewritten', async () => {
    const p = await bootstrap(server.api, 'rerun');
    const csv = 'email,plan,seats\na@example.com,pro,3\nb@example.com,free,1\nc@example.com,,\n';
    const first = await importCsv(p.sk, csv);
    assert.deepEqual([first.imported, first.updated, first.skipped], [3, 0, 0]);
    const before = await contactByEmail(p.sk, 'a@example.com');
    const second = await importCsv(p.sk, csv);
    assert.equal(second.status, 'completed');
    assert.deepEqual([second.totalRows, second.imported, second.updated, second.skipped], [3, 0, 0, 3]);
    assert.deepEqual(second.errors, []);
    const afterwards = await contactByEmail(p.sk, 'a@example.com');
    assert.deepEqual(afterwards, before, 'same id, data and updatedAt');
    assert.equal(await contactCount(p.project.id), 3);
  });

  test("a field's type stays the one first seen: an import does not retype it", async () => {
    const p = await bootstrap(server.api, 'types');
    await p.sk.post('/contacts', { email: 'first@example.com', data: { code: 'A1' } });
    const job = await importCsv(p.sk, 'email,code,score\nsecond@example.com,42,7\nthird@example.com,B2,high\n');
    assert.equal(job.imported, 2);
    const types = await fieldTypes(p.sk);
    assert.equal(types['data.code'], 'string');
    assert.equal(types['data.score'], 'number', 'a new field takes the type of its first value in the file');
    assert.deepEqual((await contactByEmail(p.sk, 'second@example.com')).data, { code: 42, score: 7 });
    assert.deepEqual((await contactByEmail(p.sk, 'third@example.com')).data, { code: 'B2', score: 'high' });
  });
});

describe('POST /contacts/import: rows reported in errors', () => {
  test('empty email, invalid email, a duplicate (last row wins) and a row wider than the header', async () => {
    const p = await bootstrap(server.api, 'row-errors');
    const csv = [
      'email,plan,city',
      'dup@example.com,free,Paris', // 2: superseded by row 6
      ',pro,Rome', // 3: missing
      'not an email,pro,Rome', // 4: invalid
      'ok@example.com,pro,Rome,extra', // 5: too many columns
      'DUP@example.com,pro,', // 6: the last row for dup@ wins
      'fine@example.com,pro,Rome,,', // 7: trailing empty cells are fine
      '   ,,', // 8: blank row, ignored
    ].join('\n');
    const job = await importCsv(p.sk, csv);
    assert.equal(job.status, 'completed');
    assert.equal(job.totalRows, 6);
    assert.equal(job.processedRows, 6);
    assert.equal(job.imported, 2);
    assert.equal(job.updated, 0);
    assert.equal(job.skipped, 4);
    assert.equal(job.errorCount, 4);
    assert.deepEqual(job.errors, [
      { row: 2, email: 'dup@example.com', reason: 'duplicate_email' },
      { row: 3, email: '', reason: 'missing_email' },
      { row: 4, email: 'not an email', reason: 'invalid_email' },
      { row: 5, email: 'ok@example.com', reason: 'too_many_columns' },
    ]);
    const dup = await contactByEmail(p.sk, 'dup@example.com');
    assert.deepEqual(dup.data, { plan: 'pro' }, 'one contact, from the last row only');
    const lookup = await p.sk.post('/contacts/lookup', { emails: ['ok@example.com', 'fine@example.com'] });
    assert.deepEqual(lookup.body.notFound, ['ok@example.com']);
    assert.equal(await contactCount(p.project.id), 2);
  });

  test("a row over 256 KB of data, a locale that is not text, and a row that would take a contact's data past 1 MB are errors; the rest import", async () => {
    const p = await bootstrap(server.api, 'data-bounds');
    const value = (c: string) => c.repeat(250_000); // about 250 KB of JSON: within one row's 256 KB
    // Four columns of 250 KB fit a contact's 1 MB; the fifth would pass it.
    for (const column of ['a', 'b', 'c', 'd']) {
      const job = await importCsv(p.sk, `email,${column}\ngrow@example.com,${value(column)}\n`);
      assert.deepEqual([job.imported + job.updated, job.errorCount], [1, 0], column);
    }
    const job = await importCsv(
      p.sk,
      ['email,e', `grow@example.com,${value('e')}`, `huge@example.com,${'h'.repeat(300_000)}`, 'fine@example.com,1'].join('\n'),
    );
    assert.deepEqual([job.imported, job.updated, job.skipped, job.errorCount], [1, 0, 2, 2]);
    assert.deepEqual(job.errors, [
      { row: 2, email: 'grow@example.com', reason: 'data_too_big' },
      { row: 3, email: 'huge@example.com', reason: 'data_too_big' },
    ]);
    const grown = await contactByEmail(p.sk, 'grow@example.com');
    assert.deepEqual(Object.keys(grown.data).sort(), ['a', 'b', 'c', 'd']);
    const lookup = await p.sk.post('/contacts/lookup', { emails: ['huge@example.com', 'fine@example.com'] });
    assert.deepEqual(lookup.body.notFound, ['huge@example.com']);
    // `yes` is a boolean, and a locale must be text, as through the API.
    const locale = await importCsv(p.sk, 'email,locale\nloc@example.com,yes\nde@example.com,de\n');
    assert.deepEqual(locale.errors, [{ row: 2, email: 'loc@example.com', reason: 'invalid_data' }]);
    assert.equal(locale.imported, 1);
  });

  test('stored errors are capped at 1,000 while errorCount counts them all', async () => {
    const p = await bootstrap(server.api, 'many-errors');
    const rows = Array.from({ length: 1205 }, (_, i) => `bad-${i},x`);
    const job = await importCsv(p.sk, `email,plan\n${rows.join('\n')}\ngood@example.com,y\n`);
    assert.equal(job.status, 'completed');
    assert.equal(job.totalRows, 1206);
    assert.equal(job.imported, 1);
    assert.equal(job.skipped, 1205);
    assert.equal(job.errorCount, 1205);
    assert.equal(job.errors.length, 1000);
    assert.deepEqual(job.errors[0], { row: 2, email: 'bad-0', reason: 'invalid_email' });
    assert.deepEqual(job.errors[999], { row: 1001, email: 'bad-999', reason: 'invalid_email' });
  });
});

describe('POST /contacts/import: files refused before anything is imported', () => {
  const refused = async (p: Bootstrapped, content: string | Buffer, status: number, code: string, message: RegExp) => {
    const res = await upload(p.sk, content, 'contacts.csv');
    assert.equal(res.status, status, res.text);
    assert.equal(res.body.error.code, code);
    assert.match(res.body.error.message, message);
    assert.equal(await jobCount(p.project.id), 0);
    assert.equal(await contactCount(p.project.id), 0);
    return res;
  };

  test('a 6 MB file is 413 PAYLOAD_TOO_LARGE', async () => {
    const p = await bootstrap(server.api, 'too-large');
    const line = 'someone@example.com,' + 'x'.repeat(80) + '\n';
    const big = 'email,note\n' + line.repeat(Math.ceil((6 * MB) / line.length));
    const res = await refused(p, big, 413, 'PAYLOAD_TOO_LARGE', /5 MB/);
    assert.equal(res.body.error.details.maxBytes, 5 * MB);
  });

  test('a file without an email column is 400', async () => {
    const p = await bootstrap(server.api, 'no-email');
    const res = await refused(p, 'mail,name\na@example.com,Ada\n', 400, 'BAD_REQUEST', /no 'email' column/);
    assert.deepEqual(res.body.error.details.columns, ['mail', 'name']);
  });

  test('a header with two email columns or a repeated column name is 400', async () => {
    const p = await bootstrap(server.api, 'bad-header');
    await refused(p, 'email,Email\na@example.com,b@example.com\n', 400, 'BAD_REQUEST', /more than one 'email'/);
    await refused(p, 'email,plan,plan\na@example.com,x,y\n', 400, 'BAD_REQUEST', /two columns named 'plan'/);
  });

  test('a column name with a dot is 400 naming it, and data.<key> is told to drop the prefix', async () => {
    const p = await bootstrap(server.api, 'dotted-header');
    const prefixed = await refused(
      p,
      'email,data.plan\na@example.com,pro\n',
      400,
      'BAD_REQUEST',
      /^The CSV column 'data\.plan' contains a dot, which a custom field's name cannot hold: name the column 'plan'/,
    );
    assert.deepEqual(prefixed.body.error.details, { column: 'data.plan' });
    await refused(p, 'email,a.b\na@example.com,1\n', 400, 'BAD_REQUEST', /^The CSV column 'a\.b' contains a dot, which a custom field's name cannot hold$/);
  });

  test('a binary file named .csv is 400', async () => {
    const p = await bootstrap(server.api, 'binary');
    const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');
    await refused(p, png, 400, 'BAD_REQUEST', /binary/);
  });

  test('invalid UTF-8 (a Latin-1 export) is 400', async () => {
    const p = await bootstrap(server.api, 'latin1');
    const latin1 = Buffer.from('email,city\nzoe@example.com,Zürich\n', 'latin1');
    await refused(p, latin1, 400, 'BAD_REQUEST', /UTF-8/);
  });

  test('an empty file is 400; no file part is 422; a JSON body is 400', async () => {
    const p = await bootstrap(server.api, 'no-file');
    await refused(p, '', 400, 'BAD_REQUEST', /empty/);
    const wrongField = await p.sk.request('POST', '/contacts/import', { raw: form('email\na@example.com\n', 'c.csv', 'csv') });
    assert.equal(wrongField.status, 422);
    assert.equal(wrongField.body.error.errors[0].field, 'file');
    const json = await p.sk.post('/contacts/import', { file: 'email\n' });
    assert.equal(json.status, 400);
    assert.equal(await jobCount(p.project.id), 0);
  });

  test('without a secret key the upload is 401', async () => {
    const res = await server.api.request('POST', '/contacts/import', { raw: form('email\na@example.com\n') });
    assert.equal(res.status, 401);
    assert.equal(res.body.error.code, 'INVALID_API_KEY');
  });
});

describe('GET /contacts/import/:jobId', () => {
  test('an unknown or malformed job id is 404 JOB_NOT_FOUND (the route is not shadowed by /contacts/:id)', async () => {
    const unknown = `imp_${'0'.repeat(32)}`;
    const res = await b.sk.get(`/contacts/import/${unknown}`);
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'JOB_NOT_FOUND');
    assert.deepEqual(res.body.error.details, { resource: 'job', id: unknown });
    const malformed = await b.sk.get('/contacts/import/nope');
    assert.equal(malformed.status, 404);
    assert.equal(malformed.body.error.code, 'JOB_NOT_FOUND');
  });

  test("another project's job is 404, and its data stays its own", async () => {
    const other = await bootstrap(server.api, 'other');
    const started = await upload(other.sk, 'email\nsecret@example.com\n');
    assert.equal(started.status, 202);
    await waitForJob(other.sk, started.body.jobId);
    const res = await b.sk.get(`/contacts/import/${started.body.jobId}`);
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'JOB_NOT_FOUND');
    const lookup = await b.sk.post('/contacts/lookup', { emails: ['secret@example.com'] });
    assert.deepEqual(lookup.body.notFound, ['secret@example.com']);
  });

  test('a dashboard session with X-Project-Id reads the job too', async () => {
    const started = await upload(b.sk, 'email\nsession@example.com\n');
    const job = await waitForJob(b.sk, started.body.jobId);
    const res = await server.api.get(`/contacts/import/${job.jobId}`, {
      cookie: b.cookie,
      headers: { 'x-project-id': b.project.id },
    });
    assert.equal(res.status, 200);
    assert.equal(res.body.imported, 1);
  });
});

describe('imports per project', () => {
  /** Runs `fn` while imports of `held@example.com` cannot finish: another transaction holds that contact's row. */
  async function withImportsHeld<T>(p: Bootstrapped, fn: () => Promise<T>): Promise<T> {
    const created = await p.sk.post('/contacts', { email: 'held@example.com' });
    assert.equal(created.status, 201, created.text);
    const other = await server.ctx.database.pool.connect();
    try {
      await other.query('BEGIN');
      await other.query('SELECT 1 FROM contacts WHERE id = $1 FOR UPDATE', [created.body.id]);
      return await fn();
    } finally {
      await other.query('COMMIT');
      other.release();
    }
  }

  test('8 concurrent uploads: exactly 5 are queued, 3 are 429 with Retry-After and store nothing; another project is not held to them', async () => {
    // Unbounded, one project could queue hundreds of 5 MB files a minute ahead of every other project's import.
    const a = await bootstrap(server.api, 'importcap');
    const csv = 'email,plan\nheld@example.com,pro\nfree@example.com,free\n';
    const answers = await withImportsHeld(a, async () => {
      const all = await Promise.all(Array.from({ length: 8 }, () => upload(a.sk, csv)));
      // Another project has slots of its own, even while this one's are all taken.
      const other = await bootstrap(server.api, 'importfree');
      const theirs = await upload(other.sk, 'email\nsomeone@example.com\n');
      assert.equal(theirs.status, 202, theirs.text);
      return all;
    });
    const accepted = answers.filter((r) => r.status === 202);
    const refused = answers.filter((r) => r.status !== 202);
    assert.equal(accepted.length, 5, answers.map((r) => r.status).join(','));
    for (const res of refused) {
      assert.equal(res.status, 429, res.text);
      assert.equal(res.headers.get('retry-after'), '5');
      assert.equal(res.body.error.code, 'RATE_LIMIT_EXCEEDED');
      assert.equal(res.body.error.message, 'This project already has 5 imports queued or running; try again in 5 seconds');
      assert.deepEqual(res.body.error.details, { retryAfter: 5, limit: 5 });
    }
    assert.equal(await jobCount(a.project.id), 5, 'a refused upload stores no job');

    // Once they finish, the project uploads again; each of the five imported the file.
    for (const r of accepted) {
      const job = await waitForJob(a.sk, r.body.jobId);
      assert.deepEqual([job.status, job.processedRows, job.imported + job.updated + job.skipped], ['completed', 2, 2]);
    }
    const again = await importCsv(a.sk, csv);
    assert.deepEqual([again.imported, again.updated, again.skipped], [0, 0, 2]);
  });

  test('projects take turns: another project’s import posted after five of one project’s runs second, not sixth', async () => {
    const a = await bootstrap(server.api, 'importturns');
    const b = await bootstrap(server.api, 'importturnsother');
    const csv = 'email,plan\nheld@example.com,pro\n';
    const ids = await withImportsHeld(a, async () => {
      const mine: string[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await upload(a.sk, csv);
        assert.equal(res.status, 202, res.text);
        mine.push(res.body.jobId);
      }
      const theirs = await upload(b.sk, 'email\nturn@example.com\n');
      assert.equal(theirs.status, 202, theirs.text);
      return [...mine, theirs.body.jobId];
    });
    for (const [i, id] of ids.entries()) await waitForJob(i < 5 ? a.sk : b.sk, id);
    const started = await server.sql<{ job: string }>(
      `SELECT data->>'jobId' AS job FROM pgboss.job WHERE name = $1 AND data->>'jobId' = ANY($2) ORDER BY started_on, created_on`,
      [IMPORT_QUEUE, ids],
    );
    // The first of the five was held; the other project's import came next, then the other four.
    assert.deepEqual(
      started.map((r) => ids.indexOf(r.job)),
      [0, 5, 1, 2, 3, 4],
    );
  });
});

describe('large files and failures', () => {
  test('a 5 MB file (about 75,000 rows) imports in batches with live progress', async () => {
    const p = await bootstrap(server.api, 'five-mb');
    // Half the rows update contacts that already exist.
    const header = 'email,first_name,plan,seats,active,signup\n';
    const lines: string[] = [];
    let size = Buffer.byteLength(header);
    for (let i = 0; ; i++) {
      const line = `user${i}@bulk-import.example.com,Name${i},${i % 2 ? 'pro' : 'free'},${i % 50},${i % 3 === 0},2024-01-${String((i % 28) + 1).padStart(2, '0')}\n`;
      if (size + line.length > 5 * MB) break;
      lines.push(line);
      size += line.length;
    }
    const total = lines.length;
    const existing = Math.floor(total / 2);
    await server.sql(
      `INSERT INTO contacts (id, project_id, email, subscribed, data)
       SELECT 'cnt_' || lpad(to_hex(g), 32, '0'), $1, 'user' || g || '@bulk-import.example.com', g % 2 = 0, '{"old": true}'::jsonb
         FROM generate_series(0, $2::int - 1) AS g`,
      [p.project.id, existing],
    );
    const body = header + lines.join('');
    assert.ok(Buffer.byteLength(body) <= 5 * MB && Buffer.byteLength(body) > 5 * MB - 200);

    const res = await upload(p.sk, body);
    assert.equal(res.status, 202, res.text);
    const seen: Job[] = [];
    const job = await waitForJob(p.sk, res.body.jobId, seen, 120_000);
    assert.equal(job.status, 'completed', job.failureReason);
    assert.equal(job.totalRows, total);
    assert.equal(job.processedRows, total);
    assert.equal(job.imported, total - existing);
    assert.equal(job.updated, existing);
    assert.equal(job.skipped, 0);
    assert.equal(await contactCount(p.project.id), total);

    // Progress only moves forward, in whole batches, and was visible while the job ran.
    const processed = seen.map((s) => s.processedRows);
    assert.deepEqual(
      processed,
      [...processed].sort((x, y) => x - y),
    );
    const partial = seen.filter((s) => s.processedRows > 0 && s.processedRows < total);
    assert.ok(partial.length > 0, 'some poll saw the job part-way');
    for (const s of partial) {
      assert.equal(s.status, 'processing');
      assert.equal(s.totalRows, total);
      assert.equal(s.processedRows % 1000, 0);
    }

    const updated = await contactByEmail(p.sk, 'user1@bulk-import.example.com');
    assert.equal(updated.subscribed, false, 'existing contacts keep their subscription');
    assert.deepEqual(updated.data, { old: true, first_name: 'Name1', plan: 'pro', seats: 1, active: false, signup: '2024-01-02' });
    const last = await contactByEmail(p.sk, `user${total - 1}@bulk-import.example.com`);
    assert.equal(last.subscribed, true);
    const types = await fieldTypes(p.sk);
    assert.equal(types['data.seats'], 'number');
    assert.equal(types['data.active'], 'boolean');
    assert.equal(types['data.signup'], 'date');
  });

  test('a file that cannot be parsed fails with a reason and imports nothing', async () => {
    const p = await bootstrap(server.api, 'malformed');
    const rows = Array.from({ length: 1500 }, (_, i) => `m${i}@example.com,ok`);
    const job = await importCsv(p.sk, `email,note\n${rows.join('\n')}\nlast@example.com,"never closed\n`);
    assert.equal(job.status, 'failed');
    assert.match(job.failureReason ?? '', /^The CSV file could not be parsed: Quote Not Closed/);
    assert.equal(job.processedRows, 0);
    assert.equal(job.imported, 0);
    assert.ok(job.completedAt);
    assert.equal(await contactCount(p.project.id), 0);
  });

  test("columns that would pass the project's 500 custom fields fail the job, saying so, and import nothing", async () => {
    const p = await bootstrap(server.api, 'fields full');
    const fields = Object.fromEntries(Array.from({ length: 499 }, (_, i) => [`f${i}`, i]));
    assert.equal((await p.sk.post('/contacts', { email: 'has-fields@example.com', data: fields })).status, 201);
    const job = await importCsv(p.sk, 'email,new1,new2\nn1@example.com,a,b\n');
    assert.equal(job.status, 'failed');
    assert.match(job.failureReason ?? '', /^A project has at most 500 custom fields: this write would bring it to 501 \(it has 499\)/);
    assert.equal(await contactCount(p.project.id), 1);
  });

  test('a job that keeps failing part-way is failed with a reason; committed batches stay, counted exactly', async () => {
    const p = await bootstrap(server.api, 'fault');
    // Fault injection in the real database: inserting this one address raises an error.
    await server.sql(`CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.email = 'boom@example.com' THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$`);
    await server.sql('CREATE TRIGGER refuse_boom BEFORE INSERT ON contacts FOR EACH ROW EXECUTE FUNCTION refuse_boom()');
    try {
      const rows = Array.from({ length: 2500 }, (_, i) => (i === 1600 ? 'boom@example.com,x' : `f${i}@example.com,x`));
      const job = await importCsv(p.sk, `email,plan\n${rows.join('\n')}\n`);
      assert.equal(job.status, 'failed');
      assert.equal(job.failureReason, 'An unexpected error stopped the import after 1000 of 2500 rows; those rows were imported');
      assert.equal(job.totalRows, 2500);
      assert.equal(job.processedRows, 1000);
      assert.equal(job.imported, 1000);
      assert.equal(job.skipped, 0, 'a retry resumes after the committed batch instead of redoing it');
      assert.equal(await contactCount(p.project.id), 1000);
      const attempts = await server.sql<{ attempts: number; file: Buffer | null }>('SELECT attempts, file FROM import_jobs WHERE id = $1', [job.jobId]);
      assert.deepEqual(attempts, [{ attempts: 3, file: null }], 'retried, each retry resuming after the committed batch');
    } finally {
      await server.sql('DROP TRIGGER refuse_boom ON contacts');
      await server.sql('DROP FUNCTION refuse_boom()');
    }
  });
});

describe('hostile files: the API process stays responsive and answers stay small', () => {
  test('250,000 rows import without holding the event loop, with exact counts (the last row of each email wins)', async () => {
    const p = await bootstrap(server.api, 'many-rows');
    const rows = 250_000;
    const emails = 2_000; // row i has email `${i % emails}@x.co`: only the last 2,000 rows are imported
    const lines = ['email,n'];
    for (let i = 0; i < rows; i++) lines.push(`${i % emails}@x.co,${i}`);
    const csv = lines.join('\n') + '\n';
    assert.ok(csv.length < 5 * MB);

    const { result: job, stallMs } = await stallDuring(async () => {
      const done = await importCsv(p.sk, csv);
      await sleep(30); // one more sample after the last stretch of work
      return done;
    });
    assert.ok(stallMs < 1000, `the event loop was held for ${Math.round(stallMs)} ms`);

    assert.equal(job.status, 'completed', job.failureReason);
    assert.equal(job.totalRows, rows);
    assert.equal(job.processedRows, rows);
    assert.equal(job.imported, emails);
    assert.equal(job.updated, 0);
    assert.equal(job.skipped, rows - emails);
    assert.equal(job.errorCount, rows - emails);
    assert.equal(job.errors.length, 1000);
    assert.deepEqual(job.errors[0], { row: 2, email: '0@x.co', reason: 'duplicate_email' });
    assert.deepEqual(job.errors[999], { row: 1001, email: '999@x.co', reason: 'duplicate_email' });
    const wrong = await server.sql<{ n: number; wrong: number }>(
      `SELECT count(*)::int AS n,
              count(*) FILTER (WHERE (data->>'n')::int <> $2::int - $3::int + split_part(email, '@', 1)::int OR NOT subscribed)::int AS wrong
         FROM contacts WHERE project_id = $1`,
      [p.project.id, rows, emails],
    );
    assert.deepEqual(wrong, [{ n: emails, wrong: 0 }], 'one contact per email, each from its last row');
    assert.deepEqual((await contactByEmail(p.sk, '1999@x.co')).data, { n: rows - 1 });
  });

  test('a header longer than 64 KB or wider than 1,000 columns is 400 before it is parsed; header errors echo a few names', async () => {
    const p = await bootstrap(server.api, 'wide-header');
    const refuse = async (content: string, message: RegExp) => {
      const res = await upload(p.sk, content);
      assert.equal(res.status, 400, res.text.slice(0, 300));
      assert.equal(res.body.error.code, 'BAD_REQUEST');
      assert.match(res.body.error.message, message);
      assert.ok(res.text.length < 4096, `a ${res.text.length}-character answer`);
      return res.body.error;
    };
    // 4 MB of header (600,000 columns) without an email column.
    const columns = Array.from({ length: 600_000 }, (_, i) => `c${i}`);
    const huge = await refuse(`name,${columns.join(',')}\n`, /^The header row of the CSV file is longer than 65536 characters$/);
    assert.deepEqual(huge.details, { maxCharacters: 65536 });
    const long = await refuse(`email,${'n'.repeat(65_531)}\na@example.com,x\n`, /longer than 65536 characters/);
    assert.deepEqual(long.details, { maxCharacters: 65536 });
    const wide = await refuse(`email,${columns.slice(0, 1000).join(',')}\na@example.com\n`, /^The CSV file has 1001 columns; at most 1000 can be imported$/);
    assert.deepEqual(wide.details, { columns: 1001, maxColumns: 1000 });
    const noEmail = await refuse(`${columns.slice(0, 900).join(';')};${'x'.repeat(500)}\n`, /no 'email' column/);
    assert.deepEqual(noEmail.details, { columns: columns.slice(0, 20), columnCount: 901 });
    const twice = await refuse(`email,${'n'.repeat(500)},${'n'.repeat(500)}\n`, /two columns named/);
    assert.deepEqual(twice.details, { column: 'n'.repeat(100) });
    assert.equal(await jobCount(p.project.id), 0);

    // At the bounds the file imports.
    const widest = ['email', ...columns.slice(0, 999)].join(',');
    const job = await importCsv(p.sk, `${widest}\nwide@example.com,${Array(999).fill('').join(',')}v\n`);
    assert.equal(job.status, 'completed', job.failureReason);
    assert.equal(job.imported, 1);
    assert.deepEqual((await contactByEmail(p.sk, 'wide@example.com')).data, { c998: 'v' });
  });

  test("a refused row's error keeps at most 254 characters of its email cell, without splitting a character", async () => {
    const p = await bootstrap(server.api, 'huge-cells');
    const cell = 'y'.repeat(MB);
    const csv = [
      'email,plan',
      ...Array.from({ length: 3 }, () => `${cell},x`),
      `${'a'.repeat(253)}${'😀'.repeat(10)},x`,
      `${cell}@example.com,x,extra`,
      'ok@example.com,x',
    ].join('\n');
    const job = await importCsv(p.sk, csv);
    assert.equal(job.status, 'completed', job.failureReason);
    assert.equal(job.imported, 1);
    assert.equal(job.errorCount, 5);
    const lengths = job.errors.map((e) => [e.row, e.email.length, e.reason]);
    assert.deepEqual(
      lengths,
      [2, 3, 4, 5, 6].map((row) => [row, row === 5 ? 253 : 254, row === 6 ? 'too_many_columns' : 'invalid_email']),
    );
    assert.deepEqual(job.errors, [
      ...[2, 3, 4].map((row) => ({ row, email: 'y'.repeat(254), reason: 'invalid_email' })),
      { row: 5, email: 'a'.repeat(253), reason: 'invalid_email' },
      { row: 6, email: 'y'.repeat(254), reason: 'too_many_columns' },
    ]);
    const res = await p.sk.get(`/contacts/import/${job.jobId}`);
    assert.ok(res.text.length < 4096, `a ${res.text.length}-character answer`);
  });
});
