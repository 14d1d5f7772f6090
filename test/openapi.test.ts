import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import SwaggerParser from '@apidevtools/swagger-parser';
import Fastify from 'fastify';
import { z } from 'zod';
import { describe as describeRoute, openApiPath, registerOpenApi } from '../src/http/openapi.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { waitForJob } from './helpers/bulk.ts';
import { BROWSER_SETUP_TIMEOUT_MS, launchBrowser, openPage } from './helpers/browser.ts';
import type { RequestOptions } from './helpers/http.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

let server: TestServer;

before(async () => {
  server = await startTestServer();
});
after(async () => {
  await server?.stop();
});

type Operation = {
  operationId: string;
  summary: string;
  tags: string[];
  responses: Record<string, unknown>;
  security?: Record<string, string[]>[];
  requestBody?: { content: Record<string, unknown> };
  'x-undescribed'?: boolean;
};
type Doc = { openapi: string; paths: Record<string, Record<string, Operation>>; components: Record<string, Record<string, unknown>> };

const fetchDoc = async () => {
  const res = await server.api.get<Doc>('/openapi.json');
  assert.equal(res.status, 200, res.text);
  return res.body;
};

/**
 * Routes that are in the document without a description of their own (no operationId, schemas or
 * responses yet): this list only shrinks. A route described since must leave it (the test below
 * fails when the list names a described route). The preference pages belong to another branch in
 * the round that added the document; describe them with `describe({...})` in their routes.ts.
 */
const NOT_YET_DESCRIBED = new Set<string>([]);

/** The dashboard's built files (one @fastify/static route each) are not API operations. */
const isDashboardFile = (r: { url: string; doc: unknown }) => r.url.startsWith('/app/') && !r.doc;

describe('GET /openapi.json', () => {
  test('answers an OpenAPI 3.1 document without authentication', async () => {
    const res = await server.api.get<Doc>('/openapi.json');
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /application\/json/);
    assert.equal(res.body.openapi, '3.1.0');
    assert.deepEqual(Object.keys(res.body.components.securitySchemes).sort(), ['publicKey', 'secretKey', 'session']);
    for (const name of ['Error', 'SimpleError', 'ValidationError', 'RateLimitError']) assert.ok(res.body.components.schemas[name], name);
  });

  test('passes the OpenAPI validator with no errors', async () => {
    const doc = await fetchDoc();
    await SwaggerParser.validate(structuredClone(doc) as never);
  });

  test('every registered route is in the document, and the undescribed ones are exactly the listed ones', async () => {
    const doc = await fetchDoc();
    const routes = server.app.registeredRoutes;
    assert.ok(routes.length > 100, `only ${routes.length} routes registered`);
    const missing: string[] = [];
    const undescribed: string[] = [];
    for (const r of routes) {
      if (isDashboardFile(r)) continue;
      const op = doc.paths[openApiPath(r.url)]?.[r.method.toLowerCase()];
      if (!op) missing.push(`${r.method} ${r.url}`);
      else if (op['x-undescribed']) undescribed.push(`${r.method} ${r.url}`);
    }
    assert.deepEqual(missing, []);
    const stale = [...NOT_YET_DESCRIBED].filter((k) => !undescribed.includes(k));
    assert.deepEqual(stale, [], 'described now: remove from NOT_YET_DESCRIBED');
    assert.deepEqual(
      undescribed.filter((k) => !NOT_YET_DESCRIBED.has(k)),
      [],
      'describe these routes with describe({...}) in their routes.ts',
    );
  });

  test('operationIds are unique and every described operation has a summary, a tag and a success response', async () => {
    const doc = await fetchDoc();
    const seen = new Map<string, string>();
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        const where = `${method.toUpperCase()} ${path}`;
        assert.ok(!seen.has(op.operationId), `${op.operationId} used by ${seen.get(op.operationId)} and ${where}`);
        seen.set(op.operationId, where);
        if (op['x-undescribed']) continue;
        assert.match(op.operationId, /^[a-z][A-Za-z]*(\.[a-z][A-Za-z]*)+$/, where);
        assert.ok(op.summary, where);
        assert.equal(op.tags.length, 1, where);
        assert.ok(
          Object.keys(op.responses).some((s) => /^[23]\d\d$/.test(s)),
          `${where} has no success response`,
        );
      }
    }
  });
});

describe('examples', () => {
  test('every request and response example in the document passes the schema it illustrates', async () => {
    const wrong: string[] = [];
    let checked = 0;
    for (const r of server.app.registeredRoutes) {
      const doc = r.doc;
      if (!doc) continue;
      if (doc.bodyExample !== undefined && doc.body) {
        checked++;
        const result = doc.body.safeParse(doc.bodyExample);
        if (!result.success) wrong.push(`${r.method} ${r.url} body: ${result.error.issues[0].path.join('.')} ${result.error.issues[0].message}`);
      }
      for (const [status, res] of Object.entries(doc.responses)) {
        if (!res || res instanceof z.ZodType || res.example === undefined || !res.schema) continue;
        checked++;
        const result = res.schema.safeParse(res.example);
        if (!result.success) wrong.push(`${r.method} ${r.url} ${status}: ${result.error.issues[0].path.join('.')} ${result.error.issues[0].message}`);
      }
    }
    assert.ok(checked >= 10, `only ${checked} examples`);
    assert.deepEqual(wrong, []);
  });
});

describe('the document tells the truth about credentials', () => {
  test('every operation with a security requirement answers 401 without credentials; every public one does not', async () => {
    const doc = await fetchDoc();
    const wrong: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops) as [string, Operation & { security?: unknown[] }][]) {
        if (op['x-undescribed'] || method === 'options') continue;
        const url = path.replace(/\{[^}]+\}/g, 'x');
        const hasBody = ['post', 'put', 'patch'].includes(method);
        const res = await server.api.request(method.toUpperCase(), url, hasBody ? { body: {} } : {});
        const secured = (op.security ?? []).length > 0;
        if (secured !== (res.status === 401))
          wrong.push(`${method.toUpperCase()} ${path}: documented ${secured ? 'secured' : 'public'}, answered ${res.status}`);
      }
    }
    assert.deepEqual(wrong, []);
  });
});

/** Every described operation of the document, with how to call it as `owner` (path parameters filled in). */
function operationsOf(doc: Doc, owner: Bootstrapped) {
  const out: { where: string; method: string; path: string; url: string; op: Operation; auth: RequestOptions }[] = [];
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      if (op['x-undescribed'] || method === 'options') continue;
      const schemes = (op.security ?? []).flatMap((s) => Object.keys(s));
      const auth: RequestOptions = schemes.includes('secretKey')
        ? { key: owner.project.secretKey }
        : schemes.includes('publicKey')
          ? { key: owner.project.publicKey }
          : schemes.includes('session')
            ? { cookie: owner.cookie }
            : {};
      // The caller's own project and user, so a route that checks membership first still reads the body.
      const url = path.replace(/\{([^}]+)\}/g, (_m, name: string) =>
        name === 'userId' ? owner.userId : name === 'id' && /^\/(users\/@me\/)?projects\//.test(path) ? owner.project.id : 'x',
      );
      out.push({ where: `${method.toUpperCase()} ${path}`, method: method.toUpperCase(), path, url, op, auth });
    }
  }
  return out;
}

describe('the document lists the errors a request body can cause', () => {
  let owner: Bootstrapped;
  before(async () => {
    owner = await bootstrap(server.api, 'Body errors');
  });

  const bodyOperations = async () => operationsOf(await fetchDoc(), owner).filter((o) => o.op.requestBody);
  const isJson = (o: { op: Operation }) => Object.keys(o.op.requestBody?.content ?? {}).includes('application/json');

  test('every operation that takes a body lists 413 and 415, and every JSON one 400', async () => {
    const ops = await bodyOperations();
    assert.ok(ops.filter(isJson).length >= 40, `only ${ops.filter(isJson).length} JSON-body operations`);
    const missing: string[] = [];
    for (const o of ops) {
      for (const status of isJson(o) ? ['400', '413', '415'] : ['413', '415']) if (!o.op.responses[status]) missing.push(`${o.where} ${status}`);
    }
    assert.deepEqual(missing, []);
  });

  test('and answers them: malformed or empty JSON is 400 INVALID_JSON, text/plain 415 UNSUPPORTED_MEDIA_TYPE, too many JSON values 413 PAYLOAD_TOO_LARGE', async () => {
    const wrong: string[] = [];
    const json = { 'content-type': 'application/json' };
    const tooMany = `[${'0,'.repeat(100_001)}0]`;
    for (const o of await bodyOperations()) {
      const answers: [string, RequestOptions, number, string][] = [
        ['text/plain', { raw: 'hello', headers: { 'content-type': 'text/plain' } }, 415, 'UNSUPPORTED_MEDIA_TYPE'],
      ];
      if (isJson(o)) {
        answers.push(['{', { raw: '{', headers: json }, 400, 'INVALID_JSON']);
        answers.push(['an empty body', { raw: '', headers: json }, 400, 'INVALID_JSON']);
        answers.push(['too many values', { raw: tooMany, headers: json }, 413, 'PAYLOAD_TOO_LARGE']);
      }
      for (const [what, opts, status, code] of answers) {
        const headers = o.auth.cookie ? { ...opts.headers, 'x-project-id': owner.project.id } : opts.headers;
        const res = await server.api.request(o.method, o.url, { ...o.auth, ...opts, headers });
        if (res.status !== status || res.body?.error?.code !== code) wrong.push(`${o.where} ${what}: ${res.status} ${res.text.slice(0, 120)}`);
      }
    }
    assert.deepEqual(wrong, []);
  });
});

describe('the document lists the errors the server answers before and after a handler', () => {
  let owner: Bootstrapped;
  before(async () => {
    owner = await bootstrap(server.api, 'Path errors');
  });

  test('414 URI_TOO_LONG is listed on exactly the operations that answer it to a 5,000-character path parameter', async () => {
    const wrong: string[] = [];
    let answered = 0;
    for (const o of operationsOf(await fetchDoc(), owner)) {
      if (!o.path.includes('{')) continue;
      const url = o.path.replace(/\{[^}]+\}/g, 'a'.repeat(5000));
      const headers = o.auth.cookie ? { 'x-project-id': owner.project.id } : undefined;
      const res = await server.api.request(o.method, url, { ...o.auth, headers });
      const listed = '414' in o.op.responses;
      if (res.status === 414) answered++;
      if (listed !== (res.status === 414) || (listed && res.body?.error?.code !== 'URI_TOO_LONG'))
        wrong.push(`${o.where}: ${listed ? 'lists' : 'does not list'} 414, answered ${res.status}`);
    }
    assert.ok(answered >= 70, `only ${answered} operations answered 414`);
    assert.deepEqual(wrong, []);
  });

  test('DELETE /contacts/fields/{field} of a field no contact has: 404 FIELD_NOT_FOUND, listed', async () => {
    const doc = await fetchDoc();
    assert.ok(doc.paths['/contacts/fields/{field}'].delete.responses['404']);
    const res = await owner.sk.delete('/contacts/fields/data.nonexistent');
    assert.equal(res.status, 404, res.text);
    assert.equal(res.body.error.code, 'FIELD_NOT_FOUND');
  });

  test('GET /campaigns with an unrecognised status: 400, listed (api-spec.md § Campaigns)', async () => {
    const doc = await fetchDoc();
    assert.ok(doc.paths['/campaigns'].get.responses['400']);
    const res = await owner.sk.get('/campaigns?status=bogus');
    assert.equal(res.status, 400, res.text);
    assert.equal(res.body.error.code, 'BAD_REQUEST');
    assert.deepEqual(res.body.error.details, { status: 'bogus' });
  });
});

type JsonSchema = {
  $ref?: string;
  type?: string;
  enum?: string[];
  required?: string[];
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
  anyOf?: JsonSchema[];
};

describe('response schemas are as tight as the spec and the code', () => {
  let owner: Bootstrapped;
  let doc: Doc;
  before(async () => {
    owner = await bootstrap(server.api, 'Response types');
    doc = await fetchDoc();
  });
  const deref = (s: JsonSchema): JsonSchema => (s.$ref ? deref(doc.components.schemas[s.$ref.split('/').pop()!] as JsonSchema) : s);
  const ok200 = (path: string, method = 'get') => {
    const res = doc.paths[path][method].responses['200'] as { content: Record<string, { schema: JsonSchema }> };
    return deref(res.content['application/json'].schema);
  };
  const JOB_STATUSES = ['queued', 'processing', 'completed', 'failed'];

  test('import job: status and error reasons are enums, and a real job answers values of them', async () => {
    const job = ok200('/contacts/import/{jobId}');
    assert.deepEqual(job.properties!.status.enum, JOB_STATUSES);
    assert.deepEqual(job.properties!.errors.items!.required, ['row', 'email', 'reason']);
    const reasons = job.properties!.errors.items!.properties!.reason.enum!;
    assert.ok(reasons.includes('invalid_email') && reasons.includes('missing_email'), String(reasons));

    const fd = new FormData();
    fd.append('file', new Blob(['email,plan\nnot-an-email,pro\n,free\nada@example.test,pro\n']), 'c.csv');
    const started = await owner.sk.request('POST', '/contacts/import', { raw: fd });
    assert.equal(started.status, 202, started.text);
    let real = (await owner.sk.get(`/contacts/import/${started.body.jobId}`)).body;
    for (let i = 0; i < 500 && !['completed', 'failed'].includes(real.status); i++) {
      assert.ok(JOB_STATUSES.includes(real.status), real.status);
      await new Promise((r) => setTimeout(r, 20));
      real = (await owner.sk.get(`/contacts/import/${started.body.jobId}`)).body;
    }
    assert.equal(real.status, 'completed');
    assert.deepEqual(
      real.errors.map((e: { row: number; reason: string }) => [e.row, e.reason]),
      [
        [2, 'invalid_email'],
        [3, 'missing_email'],
      ],
    );
    for (const e of real.errors) assert.ok(reasons.includes(e.reason), e.reason);
  });

  test('bulk job: status is an enum (not also any string) and errors are {id, reason}; a real job answers them', async () => {
    const job = ok200('/contacts/bulk/{jobId}');
    assert.deepEqual(job.properties!.status.enum, JOB_STATUSES);
    assert.equal(job.properties!.status.anyOf, undefined);
    const item = job.properties!.errors.items!;
    assert.deepEqual(Object.keys(item.properties ?? {}), ['id', 'reason']);
    assert.deepEqual(item.required, ['id', 'reason']);
    assert.deepEqual(item.properties!.reason.enum, ['not_found']);

    const contact = await owner.sk.post('/contacts', { email: 'bulk-type@example.test' });
    const started = await owner.sk.post('/contacts/bulk-unsubscribe', { contactIds: [contact.body.id, 'cnt_nobody'] });
    assert.equal(started.status, 202, started.text);
    const real = await waitForJob(owner.sk, started.body.jobId);
    assert.equal(real.status, 'completed');
    assert.deepEqual(real.errors, [{ id: 'cnt_nobody', reason: 'not_found' }]);
  });

  test('every list answers total (and its paging fields) always: required in every list schema, and sent on a later page', async () => {
    const loose: string[] = [];
    let cursorLists = 0;
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        const res = op.responses['200'] as { content?: Record<string, { schema: JsonSchema }> } | undefined;
        const schema = res?.content?.['application/json']?.schema;
        if (!schema) continue;
        for (const s of [deref(schema), ...(deref(schema).anyOf ?? []).map(deref)]) {
          const props = Object.keys(s.properties ?? {});
          const paging = props.includes('hasMore') ? ['data', 'hasMore', 'total'] : props.includes('pageSize') ? ['data', 'total', 'page', 'pageSize'] : [];
          if (props.includes('hasMore')) cursorLists++;
          for (const field of paging) if (!s.required?.includes(field)) loose.push(`${method.toUpperCase()} ${path}: ${field} optional`);
        }
      }
    }
    assert.ok(cursorLists >= 8, `only ${cursorLists} cursor lists`);
    assert.deepEqual(loose, []);

    for (const email of ['page-a@example.test', 'page-b@example.test']) await owner.sk.post('/contacts', { email });
    const first = await owner.sk.get('/contacts?limit=1&search=page-');
    assert.equal(first.body.total, 2);
    assert.equal(typeof first.body.cursor, 'string');
    const last = await owner.sk.get(`/contacts?limit=1&search=page-&cursor=${first.body.cursor}`);
    assert.deepEqual({ total: last.body.total, hasMore: last.body.hasMore, cursor: 'cursor' in last.body }, { total: 0, hasMore: false, cursor: false });
  });
});

describe('response check (STRICT_RESPONSES)', () => {
  const build = async (strictResponses: boolean) => {
    const app = Fastify();
    registerOpenApi(app, { strictResponses, version: 'test' });
    app.get(
      '/thing',
      {
        schema: describeRoute({
          operationId: 'things.get',
          summary: 'A thing',
          tag: 'Things',
          access: 'none',
          responses: { 200: z.object({ id: z.string(), count: z.number().int() }) },
        }),
      },
      async () => ({ id: 'a', count: 'three', extra: true }),
    );
    app.get(
      '/good',
      {
        schema: describeRoute({ operationId: 'things.good', summary: 'Good', tag: 'Things', access: 'none', responses: { 200: z.object({ id: z.string() }) } }),
      },
      async () => ({ id: 'b', extra: 1 }),
    );
    await app.ready();
    return app;
  };

  test('strict: a body its schema rejects is a 500; fields beyond the schema are kept, not stripped', async () => {
    const app = await build(true);
    const bad = await app.inject('/thing');
    assert.equal(bad.statusCode, 500);
    const good = await app.inject('/good');
    assert.equal(good.statusCode, 200);
    assert.deepEqual(good.json(), { id: 'b', extra: 1 });
    await app.close();
  });

  test('not strict (production): the body is serialized as it is', async () => {
    const app = await build(false);
    const res = await app.inject('/thing');
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { id: 'a', count: 'three', extra: true });
    await app.close();
  });
});

describe('GET /docs', () => {
  test('answers the reference page under a strict CSP, loading only same-origin assets that all answer 200', async () => {
    const res = await server.api.get('/docs');
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.match(csp, /default-src 'self'/);
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.doesNotMatch(res.text, /<script>(?!<\/script>)/, 'no inline script');
    const refs = [...res.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    assert.ok(refs.includes('/openapi.json'));
    assert.ok(refs.includes('/docs/assets/swagger-ui-bundle.js'));
    for (const ref of refs) {
      assert.match(ref, /^\/[^/]/, `${ref} is not same-origin`);
      const asset = await server.api.get(ref);
      assert.equal(asset.status, 200, ref);
    }
    const init = await server.api.get('/docs/assets/init.js');
    assert.match(init.text, /url: '\/openapi\.json'/);
    assert.equal((await server.api.get('/docs/assets/nope.js')).status, 404);
  });

  test('renders the document in a browser with no request to another origin and no CSP violation', { timeout: BROWSER_SETUP_TIMEOUT_MS }, async (t) => {
    const browser = await launchBrowser().catch((err: unknown) => {
      t.skip(`no browser: ${String(err)}`);
      return null;
    });
    if (!browser) return;
    try {
      const page = await openPage(browser);
      const foreign: string[] = [];
      const problems: string[] = [];
      page.on('request', (r) => {
        if (!r.url().startsWith(server.url) && !r.url().startsWith('data:')) foreign.push(r.url());
      });
      page.on('console', (m) => {
        if (m.type() === 'error') problems.push(m.text());
      });
      // Deep link: Swagger UI renders only the operations in view (a virtual list) and scrolls to this one.
      await page.goto(`${server.url}/docs#/Emails/emails.send`);
      await page.waitForSelector('.swagger-ui .info .title');
      assert.match((await page.textContent('.swagger-ui .info .title')) ?? '', /Herald API/);
      await page.waitForSelector('.opblock-summary-path[data-path="/v1/send"]', { state: 'attached' });
      assert.deepEqual(foreign, []);
      assert.deepEqual(
        problems.filter((p) => /Content Security Policy|Refused/.test(p)),
        [],
      );
    } finally {
      await browser.close();
    }
  });
});
