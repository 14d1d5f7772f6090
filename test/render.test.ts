import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RenderLimitError, TemplateSyntaxError, checkTemplates, renderEmail } from '../src/render/engine.ts';
import { signLinkToken, verifyLinkToken } from '../src/render/link-tokens.ts';
import { rewriteShorthands } from '../src/render/prepass.ts';
import { buildVariables } from '../src/render/variables.ts';

const body = async (source: string, vars: Record<string, unknown> = {}) => (await renderEmail({ subject: 'x', body: source }, vars)).html;
const subject = async (source: string, vars: Record<string, unknown> = {}) => (await renderEmail({ subject: source, body: '' }, vars)).subject;

/** Runs fn and returns this thread's CPU time for it in milliseconds (a wait for a core on a shared box is not counted). */
async function timed(fn: () => Promise<unknown>): Promise<number> {
  const start = process.threadCpuUsage();
  await fn();
  const used = process.threadCpuUsage(start);
  return (used.user + used.system) / 1000;
}

describe('template syntax forms of the spec', () => {
  test('variables, nested paths and bracket lookups', async () => {
    const vars = { name: 'Ann', profile: { tier: 'gold', 'team name': 'Blue' }, data: { 'first name': 'ann' } };
    assert.equal(await body('Hi {{name}}, {{ profile.tier }}', vars), 'Hi Ann, gold');
    assert.equal(await body('{{ profile["team name"] }}', vars), 'Blue');
    assert.equal(await body('{{data["first name"] | capitalize}}', vars), 'Ann');
  });

  test('{{first name}} reads a key containing a space, with filters and fallbacks too', async () => {
    const vars = { 'first name': 'ann', 'last name': 'Lee' };
    assert.equal(await body('Hi {{first name}} {{ last name }}!', vars), 'Hi ann Lee!');
    assert.equal(await body('{{ first name | capitalize }}', vars), 'Ann');
    assert.equal(await body('{{ nick name ?? first name }}', vars), 'ann');
    assert.equal(await subject('Hello {{first name}}', vars), 'Hello ann');
  });

  test('?? falls back for a missing, null or empty value but keeps false and 0', async () => {
    const vars = { isNull: null, no: false, zero: 0, empty: '', name: 'Bo' };
    assert.equal(await body('{{ missing ?? "there" }}', vars), 'there');
    assert.equal(await body('{{ isNull ?? "there" }}', vars), 'there');
    assert.equal(await body('{{ empty ?? "there" }}', vars), 'there');
    assert.equal(await body('{{ no ?? "yes" }}', vars), 'false');
    assert.equal(await body('{{ zero ?? 5 }}', vars), '0');
    assert.equal(await body('{{ name ?? "there" }}', vars), 'Bo');
    assert.equal(await body('{{missing??"x"}}', vars), 'x');
  });

  test('?? chains left to right, takes variables, and combines with filters', async () => {
    const vars = { nick: null, name: 'ann' };
    assert.equal(await body('{{ nick ?? name ?? "friend" }}', vars), 'ann');
    assert.equal(await body('{{ nick ?? other ?? "friend" }}', vars), 'friend');
    assert.equal(await body('{{ nick ?? name | upcase }}', vars), 'ANN');
    assert.equal(await body('{{ nick ?? "friend" | capitalize }}', vars), 'Friend');
    assert.equal(await body('{{ plan.name ?? "Free" }}', vars), 'Free');
  });

  test('conditionals, loops and filters', async () => {
    const vars = {
      plan: 'pro',
      items: [
        { name: 'pen', qty: 2 },
        { name: 'ink', qty: 1 },
      ],
      city: 'paris',
    };
    assert.equal(await body("{% if plan == 'pro' %}PRO{% else %}free{% endif %}", vars), 'PRO');
    assert.equal(await body("{% if plan == 'free' %}yes{% elsif plan %}other{% endif %}", vars), 'other');
    assert.equal(await body('{% for i in items %}{{ forloop.index }}.{{ i.name }}x{{ i.qty }};{% endfor %}', vars), '1.penx2;2.inkx1;');
    assert.equal(await body('{{ city | capitalize }} {{ city | upcase }} {{ items | size }}', vars), 'Paris PARIS 2');
    assert.equal(await body('{% assign n = items | map: "name" | join: ", " %}{{ n }}', vars), 'pen, ink');
    assert.equal(await body('{% unless plan == "free" %}paid{% endunless %}', vars), 'paid');
  });

  test('a missing variable renders as nothing', async () => {
    assert.equal(await body('[{{ nothing }}][{{ a.b.c }}]'), '[][]');
  });

  test('the pre-pass leaves tags, raw blocks and string literals alone', async () => {
    assert.equal(rewriteShorthands('{% if a %}{{ b }}{% endif %}'), '{% if a %}{{ b }}{% endif %}');
    assert.equal(await body('{% raw %}{{ a ?? "b" }} {{first name}}{% endraw %}'), '{{ a ?? "b" }} {{first name}}');
    assert.equal(await body('{{ "a ?? b | c" }}'), 'a ?? b | c');
    assert.equal(await body("{{ missing ?? 'x ?? y' }}"), 'x ?? y');
    assert.equal(await body('{{ "first name" }}'), 'first name');
    assert.equal(await body('a {{- missing ?? "x" -}} b'), 'axb');
  });
});

describe('escaping', () => {
  const vars = { name: '<script>alert("x")</script> & co', sig: '<b>Bo</b>' };

  test('the body escapes variable output; raw outputs HTML as is; escape does not double-escape', async () => {
    assert.equal(await body('<p>{{ name }}</p>', vars), '<p>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; co</p>');
    assert.equal(await body('{{ sig | raw }}', vars), '<b>Bo</b>');
    assert.equal(await body('{{ sig | escape }}', vars), '&lt;b&gt;Bo&lt;/b&gt;');
    assert.equal(await body('{{ missing ?? "<i>x</i>" }}', vars), '&lt;i&gt;x&lt;/i&gt;');
  });

  test('the subject is plain text on one line', async () => {
    assert.equal(await subject('Re: {{ name }}', vars), 'Re: <script>alert("x")</script> & co');
    assert.equal(await subject('A {{ x }} B', { x: 'one\r\ntwo\nthree' }), 'A one two three B');
  });

  test('template HTML itself is not escaped', async () => {
    assert.equal(await body('<a href="https://x.test/?a=1&b=2">{{ sig }}</a>', vars), '<a href="https://x.test/?a=1&b=2">&lt;b&gt;Bo&lt;/b&gt;</a>');
  });
});

describe('syntax errors', () => {
  test('checkTemplates reports one invalid_template error per field that does not parse', () => {
    assert.deepEqual(checkTemplates({ subject: 'Hi {{ name }}', body: '<p>{{ a ?? "b" }}</p>', other: null }), []);
    const errors = checkTemplates({ subject: 'Hi {{ name', body: '{% if a %}no end', description: undefined });
    assert.deepEqual(
      errors.map((e) => [e.field, e.code]),
      [
        ['subject', 'invalid_template'],
        ['body', 'invalid_template'],
      ],
    );
    assert.match(errors[0].message, /not closed/);
    assert.match(errors[1].message, /not closed, line:1/);
  });

  test('a tag left open in a large template is named with its line, not as a bound the rest of the template passed', () => {
    // The rest of the source counts as the open tag's markup (over 64 KB here).
    const rest = `</h1>${'<p>lorem ipsum dolor sit amet</p>\n'.repeat(3_000)}`;
    const [output] = checkTemplates({ body: `<h1>Hello\n {{ first_name }${rest}` });
    assert.equal(output.message, 'Invalid template: output "{{ first_name }</h1><p>lorem ips..." not closed, line:2, col:2');
    const [tag] = checkTemplates({ body: `{% if plan ${rest}` });
    assert.equal(tag.message, 'Invalid template: tag "{% if plan </h1><p>lorem ipsum d..." not closed, line:1, col:1');
    // Still bounded: an open output inside a raw block is refused when what follows passes a bound.
    const [raw] = checkTemplates({ body: `{% raw %}{{{% endraw %}${'{% if a %}{% endif %}'.repeat(6_000)}` });
    assert.match(raw.message, /not closed, line:1, col:10/);
  });

  test('unknown filters and tags are syntax errors', () => {
    assert.match(checkTemplates({ body: '{{ a | capitalise }}' })[0].message, /undefined filter: capitalise/);
    assert.match(checkTemplates({ body: '{% frobnicate %}' })[0].message, /frobnicate/);
  });

  test('renderEmail throws TemplateSyntaxError naming the field', async () => {
    await assert.rejects(
      renderEmail({ subject: 'ok', body: '{% for x in y %}' }, {}),
      (err: unknown) => err instanceof TemplateSyntaxError && err.field === 'body',
    );
  });
});

describe('sandbox', () => {
  test('include, render and layout cannot read files', async () => {
    for (const source of ['{% include "/etc/passwd" %}', "{% render '../../package.json' %}", '{% layout "/etc/hosts" %}', '{% include file %}']) {
      const [error] = checkTemplates({ body: source });
      assert.ok(error, source);
      assert.match(error.message, /not available in email templates/);
      await assert.rejects(renderEmail({ subject: 's', body: source }, { file: '/etc/passwd' }), TemplateSyntaxError);
    }
  });

  test('only own properties are reachable', async () => {
    assert.equal(await body('[{{ a.constructor }}][{{ a.__proto__ }}][{{ a.toString }}]', { a: {} }), '[][][]');
  });

  test('a huge range is refused at once', async () => {
    let err: unknown;
    const ms = await timed(() => renderEmail({ subject: 's', body: '{% for i in (1..1000000000) %}x{% endfor %}' }, {}).catch((e) => (err = e)));
    assert.ok(err instanceof RenderLimitError, String(err));
    assert.ok(ms < 500, `took ${ms} ms`);
  });

  test('nested loops with no output are bounded in iterations and time', async () => {
    let err: unknown;
    const source = '{% for a in r %}{% for b in r %}{% for c in r %}{% endfor %}{% endfor %}{% endfor %}';
    const r = Array.from({ length: 1000 }, (_, i) => i);
    const ms = await timed(() => renderEmail({ subject: 's', body: source }, { r }).catch((e) => (err = e)));
    assert.ok(err instanceof RenderLimitError, String(err));
    assert.match((err as Error).message, /too many loop iterations|longer than/);
    assert.ok(ms < 2000, `took ${ms} ms`);
  });

  test('a 10 MB output is refused at the 2 MB bound', async () => {
    let err: unknown;
    const big = 'x'.repeat(10_000);
    const ms = await timed(() => renderEmail({ subject: 's', body: '{% for i in (1..1000) %}{{ big }}{% endfor %}' }, { big }).catch((e) => (err = e)));
    assert.ok(err instanceof RenderLimitError, String(err));
    assert.match((err as Error).message, /exceeds 2 MB/);
    assert.ok(ms < 1000, `took ${ms} ms`);
  });

  test('doubling a captured string is bounded', async () => {
    const source = '{% assign s = "xxxxxxxxxx" %}{% for i in (1..40) %}{% capture s %}{{ s | raw }}{{ s | raw }}{% endcapture %}{% endfor %}{{ s | size }}';
    await assert.rejects(renderEmail({ subject: source, body: source }, {}), RenderLimitError);
  });

  test('a large but reasonable email renders', async () => {
    const items = Array.from({ length: 500 }, (_, i) => ({ name: `Item ${i}`, price: i }));
    const html = await body('<ul>{% for i in items %}<li>{{ i.name }}: {{ i.price }}</li>{% endfor %}</ul>', { items });
    assert.ok(html.includes('<li>Item 499: 499</li>'));
  });
});

describe('variables', () => {
  const contact = {
    id: 'cnt_0193aaaabbbbccccddddeeeeffff0000',
    email: 'ann@example.test',
    data: { plan: 'pro', name: 'Ann', email: 'stale@x.test', id: 'fake', locale: 'fr', tier: { level: 2 } },
  };
  const vars = buildVariables({
    publicUrl: 'https://mail.example.test/',
    secret: 'test-secret-0123456789abcdef',
    projectId: 'prj_1',
    emailId: '0193aaaa-bbbb-7ccc-8ddd-eeeeffff0000',
    contact,
    oneOff: { name: { value: 'Annie', persistent: false }, coupon: 'SAVE10' },
  });

  test('data keys at top level, one-off values unwrapped and overriding, service variables winning', async () => {
    assert.equal(vars.plan, 'pro');
    assert.equal(vars.name, 'Annie');
    assert.equal(vars.coupon, 'SAVE10');
    assert.equal(vars.id, contact.id);
    assert.equal(vars.email, 'ann@example.test');
    assert.equal(vars.locale, 'fr');
    assert.deepEqual(vars.data, { ...contact.data, name: 'Annie', coupon: 'SAVE10' });
    assert.equal(await body('{{ name }} {{ data.name }} {{ tier.level }} {{ data.plan }} {{ email }}', vars), 'Annie Annie 2 pro ann@example.test');
  });

  test('the three URLs carry signed tokens that verify, with no bare contact id', () => {
    for (const action of ['unsubscribe', 'subscribe', 'manage'] as const) {
      const url = vars[`${action}Url`] as string;
      const m = new RegExp(`^https://mail\\.example\\.test/${action}/([A-Za-z0-9_.-]+)$`).exec(url);
      assert.ok(m, url);
      assert.ok(!url.includes(contact.id), 'no bare contact id');
      assert.deepEqual(verifyLinkToken('test-secret-0123456789abcdef', m[1]), {
        projectId: 'prj_1',
        contactId: contact.id,
        action,
        emailId: '0193aaaa-bbbb-7ccc-8ddd-eeeeffff0000',
      });
    }
  });

  test('the URLs render unchanged inside an HTML attribute', async () => {
    const html = await body('<a href="{{ unsubscribeUrl }}">Unsubscribe</a>', vars);
    assert.equal(html, `<a href="${vars.unsubscribeUrl}">Unsubscribe</a>`);
  });

  test('locale defaults when the contact has none', () => {
    const v = buildVariables({ publicUrl: 'http://h', secret: 's'.repeat(16), projectId: 'p', contact: { id: 'c', email: 'e@x.test', data: {} } });
    assert.equal(v.locale, 'en');
    assert.equal(v.data && typeof v.data, 'object');
  });

  test('a "__proto__" data key stays plain data', () => {
    const data = JSON.parse('{"__proto__": {"polluted": true}, "a": 1}') as Record<string, unknown>;
    const v = buildVariables({ publicUrl: 'http://h', secret: 's'.repeat(16), projectId: 'p', contact: { id: 'c', email: 'e@x.test', data } });
    assert.equal((v as { polluted?: boolean }).polluted, undefined);
    assert.equal(Object.getPrototypeOf(v), Object.prototype);
    assert.equal(v.a, 1);
  });
});

describe('link tokens', () => {
  const secret = 'test-secret-0123456789abcdef';
  const claims = { projectId: 'prj_1', contactId: 'cnt_1', action: 'unsubscribe' as const };

  test('round-trip without an email id', () => {
    assert.deepEqual(verifyLinkToken(secret, signLinkToken(secret, claims)), claims);
  });

  test('a tampered token, a wrong secret or garbage is null', () => {
    const token = signLinkToken(secret, claims);
    const [h, p, s] = token.split('.');
    const forged = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(p, 'base64url').toString()), c: 'cnt_2' })).toString('base64url');
    assert.equal(verifyLinkToken(secret, `${h}.${forged}.${s}`), null);
    assert.equal(verifyLinkToken(secret, `${h}.${p}.${s[0] === 'A' ? 'B' : 'A'}${s.slice(1)}`), null);
    assert.equal(verifyLinkToken('another-secret-0123456789', token), null);
    assert.equal(verifyLinkToken(secret, 'garbage'), null);
    assert.equal(verifyLinkToken(secret, ''), null);
  });

  test('a token is the same bytes as one in an email sent before the link key was cached, and verifies', () => {
    // Signed by the code before 2026-11-28 (the key derived anew for each token): links in mail
    // already sent must keep working, so the key must stay the derived MAC's base64url text.
    const sent =
      'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJwIjoicHJqXzEiLCJjIjoiY250XzEiLCJhIjoibWFuYWdlIiwiZSI6IjBiN2M1ZjBlLThhNDQtNGM1OS05YTU1LTNmMGQ2YjBjOWYxMSIsInR5cCI6ImhlcmFsZC1saW5rIiwiaWF0IjoxNzM1Njg5NjAwLCJleHAiOjE4OTMzNjk2MDB9.e_FrjzFLOS_w8xH6fILIz-h8qZne6jmdidwcrZU0AIk';
    const manage = { projectId: 'prj_1', contactId: 'cnt_1', action: 'manage' as const, emailId: '0b7c5f0e-8a44-4c59-9a55-3f0d6b0c9f11' };
    const now = Date.UTC(2025, 0, 1);
    assert.equal(signLinkToken(secret, manage, now), sent);
    assert.deepEqual(verifyLinkToken(secret, sent, now + 1000), manage);
    assert.equal(verifyLinkToken('another-secret-0123456789', sent, now + 1000), null);
  });

  test('tokens live at least a year and then expire', () => {
    const now = Date.UTC(2025, 0, 1);
    const token = signLinkToken(secret, claims, now);
    assert.deepEqual(verifyLinkToken(secret, token, now + 366 * 24 * 3600 * 1000), claims);
    assert.equal(verifyLinkToken(secret, token, now + 6 * 366 * 24 * 3600 * 1000), null);
  });
});
