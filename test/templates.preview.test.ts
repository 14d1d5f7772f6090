import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { slowestHealthDuring } from './helpers/health.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/** POST /templates/preview: an unsaved subject and body rendered for a contact, as a send would. */

let server: TestServer;
let a: Bootstrapped;
let b: Bootstrapped;
let adaId = '';

before(async () => {
  server = await startTestServer();
  a = await bootstrap(server.api, 'Project A');
  b = await bootstrap(server.api, 'Project B');
  const ada = await a.sk.post('/contacts', { email: 'ada@example.test', data: { firstName: 'Ada', plan: 'pro' } });
  assert.equal(ada.status, 201, ada.text);
  adaId = ada.body.id;
});
after(async () => server?.stop());

const SRC = {
  subject: 'Hi {{ firstName ?? "there" }}\n({{ plan }})',
  body: '<h1>Hello {{ firstName ?? "friend" }}</h1><p>Plan: {{ plan | upcase }} <b>{{ "<x>" }}</b></p><a href="{{ unsubscribeUrl }}">Unsubscribe</a>',
};

test("renders subject, HTML and text with the contact's data", async () => {
  const res = await a.sk.post('/templates/preview', { ...SRC, contactId: adaId });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.body.subject, 'Hi Ada (pro)');
  assert.match(res.body.html, /^<h1>Hello Ada<\/h1><p>Plan: PRO <b>&lt;x&gt;<\/b><\/p><a href="http:\/\/[^"]+\/unsubscribe\/[\w.-]+">Unsubscribe<\/a>$/);
  assert.match(res.body.text, /^HELLO ADA\n\nPlan: PRO <x>\n\nUnsubscribe\n\[http:\/\/\S+\/unsubscribe\/[\w.-]+\]$/);
});

test('without a contact, a sample contact with no data is used (fallbacks show)', async () => {
  const res = await a.sk.post('/templates/preview', SRC);
  assert.equal(res.status, 200, res.text);
  assert.equal(res.body.subject, 'Hi there ()');
  assert.match(res.body.html, /^<h1>Hello friend<\/h1>/);
});

test('type MARKETING shows the unsubscribe footer a send adds, unless the body places the link itself', async () => {
  const body = '<p>News</p>';
  const marketing = await a.sk.post('/templates/preview', { subject: 'S', body, type: 'MARKETING', contactId: adaId });
  assert.equal(marketing.status, 200, marketing.text);
  assert.match(marketing.body.html, /^<p>News<\/p>.*You are receiving this email because you subscribed to our updates\..*\/unsubscribe\/[\w.-]+.*Project A/s);
  assert.match(marketing.body.text, /You are receiving this email because you subscribed to our updates\./);
  for (const other of [{ type: 'TRANSACTIONAL', body }, { type: 'HEADLESS', body }, { body }, { type: 'MARKETING', body: SRC.body }]) {
    const res = await a.sk.post('/templates/preview', { subject: 'S', ...other });
    assert.equal(res.status, 200, res.text);
    assert.doesNotMatch(res.body.html, /You are receiving this email/, JSON.stringify(other));
  }
});

test('works with the dashboard session (cookie + X-Project-Id)', async () => {
  const res = await server.api.post(
    '/templates/preview',
    { subject: 'S', body: '{{ email }}' },
    {
      cookie: a.cookie,
      headers: { 'x-project-id': a.project.id },
    },
  );
  assert.equal(res.status, 200, res.text);
  assert.equal(res.body.html, 'preview@example.com');
});

test("another project's contact is a 404, and nothing of it is rendered", async () => {
  const res = await b.sk.post('/templates/preview', { ...SRC, contactId: adaId });
  assert.equal(res.status, 404, res.text);
  assert.equal(res.body.error.code, 'CONTACT_NOT_FOUND');
});

test('a Liquid syntax error is a 422 on the field, with its line number', async () => {
  const res = await a.sk.post('/templates/preview', { subject: 'ok', body: '<p>one</p>\n<p>{% if x %}two</p>' });
  assert.equal(res.status, 422, res.text);
  assert.equal(res.body.error.code, 'VALIDATION_ERROR');
  assert.equal(res.body.error.errors.length, 1);
  assert.equal(res.body.error.errors[0].field, 'body');
  assert.equal(res.body.error.errors[0].code, 'invalid_template');
  assert.match(res.body.error.errors[0].message, /line:2/);
});

test('the sandbox limits apply: a runaway loop is a 422, not a stalled server', async () => {
  const started = Date.now();
  const res = await a.sk.post('/templates/preview', {
    subject: 'loop',
    body: '{% for i in (1..100000000) %}{% for j in (1..100000000) %}x{% endfor %}{% endfor %}',
  });
  assert.equal(res.status, 422, res.text);
  assert.equal(res.body.error.errors[0].field, 'body');
  assert.equal(res.body.error.errors[0].code, 'render_limit');
  assert.ok(Date.now() - started < 10_000, 'bounded in time');
  const health = await server.api.get('/health');
  assert.equal(health.status, 200);

  // A subject's limits are reported on the subject, and it may render at most a header line.
  const subjectLoop = await a.sk.post('/templates/preview', { subject: '{% for i in (1..100000000) %}x{% endfor %}', body: 'b' });
  assert.equal(subjectLoop.status, 422, subjectLoop.text);
  assert.deepEqual([subjectLoop.body.error.errors[0].field, subjectLoop.body.error.errors[0].code], ['subject', 'render_limit']);
  const longSubject = await a.sk.post('/templates/preview', { subject: '{% for i in (1..100) %}0123456789{% endfor %}', body: 'b' });
  assert.equal(longSubject.status, 422, longSubject.text);
  assert.deepEqual(longSubject.body.error.errors[0], {
    field: 'subject',
    code: 'render_limit',
    message: 'The rendered subject is 1,000 characters long; at most 998',
  });
});

test('bad input is a 422 and needs a secret key or a session', async () => {
  const missing = await a.sk.post('/templates/preview', { subject: 'x' });
  assert.equal(missing.status, 422, missing.text);
  assert.equal(missing.body.error.errors[0].field, 'body');
  const tooLong = await a.sk.post('/templates/preview', { subject: 'x'.repeat(999), body: 'b' });
  assert.equal(tooLong.status, 422, tooLong.text);
  assert.equal(tooLong.body.error.errors[0].field, 'subject');
  const publicKey = await a.pk.post('/templates/preview', SRC);
  assert.equal(publicKey.status, 401);
  assert.equal(publicKey.body.error.code, 'INVALID_API_KEY');
});

test('previews render off the event loop: four of a large body at once, and /health keeps answering', async () => {
  const idle = (await slowestHealthDuring(server.url, new Promise((r) => setTimeout(r, 1000)))).slowest;
  // 800 KB of paragraphs: rendering it and converting it to text took about 0.3 s on the event
  // loop (/health's slowest answer meanwhile: 335 ms, against 57 now), which a preview no longer
  // holds: it runs on a compose thread (nothing else in this file composes a message). Two from
  // each of two projects: a project has at most two previews under way.
  const adaOfB = await b.sk.post('/contacts', { email: 'ada@example.test', data: { firstName: 'Ada' } });
  assert.equal(adaOfB.status, 201, adaOfB.text);
  const body = `<h1>{{ firstName }}</h1>${'<p>paragraph</p>'.repeat(50_000)}`;
  const asks = [a.sk, a.sk, b.sk, b.sk].map((sk) => sk.post('/templates/preview', { subject: 'Big', body, contactId: sk === a.sk ? adaId : adaOfB.body.id }));
  const { result: answers, slowest } = await slowestHealthDuring(server.url, Promise.all(asks));
  for (const res of answers) {
    assert.equal(res.status, 200, JSON.stringify(res.body).slice(0, 300));
    assert.equal(res.body.html, `<h1>Ada</h1>${'<p>paragraph</p>'.repeat(50_000)}`);
    assert.equal(res.body.text, ['ADA', ...Array.from({ length: 50_000 }, () => 'paragraph')].join('\n\n'));
  }
  assert.equal(server.ctx.threads.compose.threadCount(), 1, 'the previews ran on a compose thread');
  assert.ok(slowest < idle + 1000, `/health kept answering (slowest ${slowest.toFixed(0)} ms, idle ${idle.toFixed(0)} ms)`);
});
