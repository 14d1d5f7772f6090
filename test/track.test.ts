import assert from 'node:assert/strict';
import { after, before, describe, mock, test } from 'node:test';
import { afterTrack } from '../src/modules/events/after-track.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { whileAnotherTransaction } from './helpers/other-transaction.ts';

let server: TestServer;
let b: Bootstrapped;

before(async () => {
  server = await startTestServer();
  b = await bootstrap(server.api);
});
after(async () => server?.stop());

const CONTACT = /^cnt_[0-9a-f]{32}$/;
const EVENT = /^evt_[0-9a-f]{32}$/;

type EventRow = { id: string; name: string; contact_id: string; data: Record<string, unknown> | null };

const eventsOf = (contactId: string) =>
  server.sql<EventRow>('SELECT id, name, contact_id, data FROM events WHERE contact_id = $1 ORDER BY created_at, id', [contactId]);

describe('POST /v1/track', () => {
  test('creates the contact subscribed, records the event, answers with ids and the timestamp', async () => {
    const before = Date.now();
    const res = await b.pk.post('/v1/track', { email: 'New.User@Example.com', event: 'signup' });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.success, true);
    assert.deepEqual(Object.keys(res.body.data).sort(), ['contact', 'event', 'timestamp']);
    assert.match(res.body.data.contact, CONTACT);
    assert.match(res.body.data.event, EVENT);
    const at = Date.parse(res.body.data.timestamp);
    assert.ok(at >= before - 5 && at <= Date.now() + 5, res.body.data.timestamp);

    const contact = await b.sk.get(`/contacts/${res.body.data.contact}`);
    assert.equal(contact.body.email, 'new.user@example.com');
    assert.equal(contact.body.subscribed, true);
    const rows = await eventsOf(res.body.data.contact);
    assert.deepEqual(
      rows.map((r) => [r.id, r.name]),
      [[res.body.data.event, 'signup']],
    );
  });

  test('persistent values go to the contact; the event keeps one-off values too, unwrapped', async () => {
    const res = await b.pk.post('/v1/track', {
      email: 'data@example.com',
      event: 'purchase',
      data: {
        plan: 'pro',
        seats: 3,
        profile: { tier: 'gold' },
        kept: { value: 'yes', persistent: true },
        orderId: { value: 'ord_1', persistent: false },
        empty: '',
        id: 'forged',
        email: 'other@example.com',
        unsubscribeUrl: 'http://evil',
      },
    });
    assert.equal(res.status, 200, res.text);
    const contact = await b.sk.get(`/contacts/${res.body.data.contact}`);
    assert.deepEqual(contact.body.data, { plan: 'pro', seats: 3, profile: { tier: 'gold' }, kept: 'yes' });
    assert.equal(contact.body.email, 'data@example.com');
    const [event] = await eventsOf(res.body.data.contact);
    assert.deepEqual(event.data, { plan: 'pro', seats: 3, profile: { tier: 'gold' }, kept: 'yes', orderId: 'ord_1' });

    // null deletes a key, an empty string keeps the stored value.
    const again = await b.pk.post('/v1/track', { email: 'data@example.com', event: 'purchase', data: { plan: '', seats: null } });
    assert.equal(again.status, 200, again.text);
    assert.equal(again.body.data.contact, res.body.data.contact);
    const updated = await b.sk.get(`/contacts/${res.body.data.contact}`);
    assert.deepEqual(updated.body.data, { plan: 'pro', profile: { tier: 'gold' }, kept: 'yes' });
  });

  test('re-tracking the same event creates a new record each time', async () => {
    const first = await b.pk.post('/v1/track', { email: 'repeat@example.com', event: 'page_view' });
    const second = await b.pk.post('/v1/track', { email: 'repeat@example.com', event: 'page_view' });
    assert.equal(first.body.data.contact, second.body.data.contact);
    assert.notEqual(first.body.data.event, second.body.data.event);
    assert.equal((await eventsOf(first.body.data.contact)).length, 2);
  });

  test('the event name is trimmed and keeps its case', async () => {
    const res = await b.pk.post('/v1/track', { email: 'case@example.com', event: '  Checkout Started ' });
    assert.equal(res.status, 200, res.text);
    const [event] = await eventsOf(res.body.data.contact);
    assert.equal(event.name, 'Checkout Started');
  });

  test('a name of exactly 255 characters is accepted', async () => {
    const name = 'n'.repeat(255);
    const res = await b.pk.post('/v1/track', { email: 'long@example.com', event: name });
    assert.equal(res.status, 200, res.text);
    const [event] = await eventsOf(res.body.data.contact);
    assert.equal(event.name, name);
  });
});

describe('subscription on /v1/track', () => {
  test('subscribed: false creates a new contact unsubscribed, without a subscription event', async () => {
    const res = await b.pk.post('/v1/track', { email: 'optout@example.com', event: 'visit', subscribed: false });
    assert.equal(res.status, 200, res.text);
    assert.equal((await b.sk.get(`/contacts/${res.body.data.contact}`)).body.subscribed, false);
    assert.deepEqual(
      (await eventsOf(res.body.data.contact)).map((e) => e.name),
      ['visit'],
    );
  });

  test('an unsubscribed contact stays unsubscribed when tracked without subscribed or with subscribed: false', async () => {
    const created = await b.sk.post('/contacts', { email: 'gone@example.com', subscribed: false });
    assert.equal(created.status, 201, created.text);
    const omitted = await b.pk.post('/v1/track', { email: 'gone@example.com', event: 'visit' });
    const explicit = await b.pk.post('/v1/track', { email: 'gone@example.com', event: 'visit', subscribed: false });
    assert.equal(omitted.status, 200);
    assert.equal(explicit.status, 200);
    assert.equal((await b.sk.get(`/contacts/${created.body.id}`)).body.subscribed, false);
    assert.deepEqual(
      (await eventsOf(created.body.id)).map((e) => e.name),
      ['visit', 'visit'],
    );
  });

  test('subscribed: false unsubscribes a subscribed contact (contact.unsubscribed), true resubscribes (contact.subscribed)', async () => {
    const created = await b.sk.post('/contacts', { email: 'toggle@example.com' });
    const off = await b.pk.post('/v1/track', { email: 'toggle@example.com', event: 'cancelled', subscribed: false });
    assert.equal(off.status, 200, off.text);
    assert.equal((await b.sk.get(`/contacts/${created.body.id}`)).body.subscribed, false);
    // Re-subscribing is the secret key's (issue 14 finding 7: a public key never re-subscribes an opt-out).
    const on = await b.sk.post('/events/track', { email: 'toggle@example.com', event: 'returned', subscribed: true });
    assert.equal(on.status, 200, on.text);
    assert.equal((await b.sk.get(`/contacts/${created.body.id}`)).body.subscribed, true);
    // Each subscription event shares its instant with the tracked event (ids within one millisecond are unordered).
    const names = (await eventsOf(created.body.id)).map((e) => e.name);
    assert.deepEqual(names.slice(0, 2).sort(), ['cancelled', 'contact.unsubscribed']);
    assert.deepEqual(names.slice(2).sort(), ['contact.subscribed', 'returned']);
  });
});

describe('bad input', () => {
  const RESERVED = [
    'email.sent',
    'email.opened',
    'email.anything',
    'EMAIL.SENT',
    'Email.Clicked',
    '  email.delivered  ',
    'contact.subscribed',
    'contact.unsubscribed',
    'Contact.Unsubscribed',
    'segment.vip.entry',
    'segment.vip.exit',
    'segment.my-big-segment.entry',
    'Segment.VIP.Exit',
    'segment..entry',
  ];

  for (const path of ['/v1/track', '/events/track']) {
    test(`every reserved name form is 422 reserved_event on ${path}`, async () => {
      const client = path === '/v1/track' ? b.pk : b.sk;
      for (const event of RESERVED) {
        const res = await client.post(path, { email: 'reserved@example.com', event });
        assert.equal(res.status, 422, `${event}: ${res.text}`);
        assert.equal(res.body.error.code, 'VALIDATION_ERROR');
        assert.equal(res.body.error.message, 'Request validation failed');
        assert.deepEqual(
          res.body.error.errors.map((e: { field: string; code: string }) => [e.field, e.code]),
          [['event', 'reserved_event']],
          event,
        );
      }
      const rows = await server.sql(`SELECT 1 FROM contacts WHERE email = 'reserved@example.com'`);
      assert.equal(rows.length, 0, 'a rejected track creates no contact');
    });
  }

  test('names that only resemble reserved ones are custom events', async () => {
    for (const event of ['email', 'emails.sent', 'contact.created', 'segment.vip', 'segment.entry', 'my.email.sent']) {
      const res = await b.pk.post('/v1/track', { email: 'lookalike@example.com', event });
      assert.equal(res.status, 200, `${event}: ${res.text}`);
    }
  });

  test('an event name of 256 characters is 422 too_big; empty and blank names are too_small', async () => {
    const long = await b.pk.post('/v1/track', { email: 'x@example.com', event: 'n'.repeat(256) });
    assert.equal(long.status, 422);
    assert.deepEqual(
      long.body.error.errors.map((e: { field: string; code: string }) => [e.field, e.code]),
      [['event', 'too_big']],
    );
    for (const event of ['', '   ']) {
      const res = await b.pk.post('/v1/track', { email: 'x@example.com', event });
      assert.equal(res.status, 422);
      assert.deepEqual(
        res.body.error.errors.map((e: { field: string; code: string }) => [e.field, e.code]),
        [['event', 'too_small']],
      );
    }
    const control = await b.pk.post('/v1/track', { email: 'x@example.com', event: 'bad\nname' });
    assert.equal(control.status, 422);
    assert.equal(control.body.error.errors[0].field, 'event');
  });

  test('a missing email is 422 invalid_type; a bad email invalid_string; a missing event invalid_type', async () => {
    const missing = await b.pk.post('/v1/track', { event: 'signup' });
    assert.equal(missing.status, 422);
    assert.deepEqual(missing.body.error.errors, [{ field: 'email', code: 'invalid_type', message: 'Required', received: 'undefined' }]);
    const bad = await b.pk.post('/v1/track', { email: 'not-an-email', event: 'signup' });
    assert.equal(bad.status, 422);
    assert.deepEqual(
      bad.body.error.errors.map((e: { field: string; code: string }) => [e.field, e.code]),
      [['email', 'invalid_string']],
    );
    const noEvent = await b.pk.post('/v1/track', { email: 'a@example.com' });
    assert.equal(noEvent.status, 422);
    assert.deepEqual(
      noEvent.body.error.errors.map((e: { field: string; code: string }) => [e.field, e.code]),
      [['event', 'invalid_type']],
    );
  });

  test('several problems are reported together, reserved names included', async () => {
    const res = await b.pk.post('/v1/track', { event: 'email.sent', subscribed: 'yes', data: [] });
    assert.equal(res.status, 422);
    assert.deepEqual(res.body.error.errors.map((e: { field: string; code: string }) => [e.field, e.code]).sort(), [
      ['data', 'invalid_type'],
      ['email', 'invalid_type'],
      ['event', 'reserved_event'],
      ['subscribed', 'invalid_type'],
    ]);
  });

  test('unknown body fields are 422 unrecognized_keys; a non-string locale is 422', async () => {
    const extra = await b.pk.post('/v1/track', { email: 'a@example.com', event: 'x', properties: {} });
    assert.equal(extra.status, 422);
    assert.equal(extra.body.error.errors[0].code, 'unrecognized_keys');
    const locale = await b.pk.post('/v1/track', { email: 'a@example.com', event: 'x', data: { locale: 5 } });
    assert.equal(locale.status, 422);
    assert.equal(locale.body.error.errors[0].field, 'data.locale');
  });

  test('a secret key on /v1/track is 401 INVALID_API_KEY, so is no key or an unknown key', async () => {
    for (const key of [b.project.secretKey, 'pk_unknown', undefined]) {
      const res = await server.api.post('/v1/track', { email: 'a@example.com', event: 'x' }, key ? { key } : {});
      assert.equal(res.status, 401, String(key));
      assert.equal(res.body.error.code, 'INVALID_API_KEY');
    }
    assert.equal((await server.sql(`SELECT 1 FROM contacts WHERE email = 'a@example.com'`)).length, 0);
  });

  test('the public key works on /v1/track only: /events/track and other dashboard routes are 401', async () => {
    for (const [method, path] of [
      ['POST', '/events/track'],
      ['GET', '/events'],
      ['GET', '/activity'],
    ]) {
      const res = await b.pk.request(method, path, method === 'POST' ? { body: { email: 'a@example.com', event: 'x' } } : {});
      assert.equal(res.status, 401, path);
      assert.equal(res.body.error.code, 'INVALID_API_KEY');
    }
  });

  test('a public key of a disabled project is 403 PROJECT_DISABLED', async () => {
    const d = await bootstrap(server.api);
    await server.sql(`UPDATE projects SET disabled = true, disabled_reason = 'EMAIL_REPUTATION' WHERE id = $1`, [d.project.id]);
    await server.ctx.keys.notifyChanged(d.project.id);
    const res = await d.pk.post('/v1/track', { email: 'a@example.com', event: 'x' });
    assert.equal(res.status, 403);
    assert.equal(res.body.error.code, 'PROJECT_DISABLED');
    assert.equal(res.body.error.details.reason, 'EMAIL_REPUTATION');
  });

  test('malformed JSON is 400 INVALID_JSON', async () => {
    const res = await b.pk.request('POST', '/v1/track', { raw: '{"email":', headers: { 'content-type': 'application/json' } });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'INVALID_JSON');
  });
});

describe('idempotency', () => {
  test('a reused key is 409 IDEMPOTENCY_KEY_REUSED and tracks nothing', async () => {
    const headers = { 'idempotency-key': 'track-once-1' };
    const first = await b.pk.post('/v1/track', { email: 'idem@example.com', event: 'paid' }, { headers });
    assert.equal(first.status, 200, first.text);
    const again = await b.pk.post('/v1/track', { email: 'idem@example.com', event: 'paid' }, { headers });
    assert.equal(again.status, 409);
    assert.equal(again.body.error.code, 'IDEMPOTENCY_KEY_REUSED');
    assert.equal(again.body.error.details.key, 'track-once-1');
    assert.equal(again.body.error.details.originalRequest, 'POST /v1/track');
    assert.equal(again.body.error.details.originalStatusCode, 200);
    assert.deepEqual(again.body.error.details.originalResponse, first.body);
    assert.equal((await eventsOf(first.body.data.contact)).length, 1);
  });

  test('a rejected request releases its key; keys are per project', async () => {
    const headers = { 'idempotency-key': 'track-retry-1' };
    const bad = await b.pk.post('/v1/track', { email: 'idem2@example.com', event: 'email.sent' }, { headers });
    assert.equal(bad.status, 422);
    const fixed = await b.pk.post('/v1/track', { email: 'idem2@example.com', event: 'paid' }, { headers });
    assert.equal(fixed.status, 200, fixed.text);
    const other = await bootstrap(server.api);
    const elsewhere = await other.pk.post('/v1/track', { email: 'idem2@example.com', event: 'paid' }, { headers });
    assert.equal(elsewhere.status, 200, elsewhere.text);
  });

  test("the public key's keys are apart from the secret key's: a track can neither block a send nor read its response", async () => {
    const send = (key: string) =>
      b.sk.post(
        '/v1/send',
        { to: 'receipt@example.com', from: 'shop@sandbox.herald.test', subject: 'Receipt', body: '<p>Paid</p>' },
        { headers: { 'idempotency-key': key } },
      );
    const track = (key: string) => b.pk.post('/v1/track', { email: 'visitor@example.com', event: 'looked' }, { headers: { 'idempotency-key': key } });

    // A key a web page's visitor claimed first: the send with it is still performed.
    assert.equal((await track('order-1001-receipt')).status, 200);
    const sent = await send('order-1001-receipt');
    assert.equal(sent.status, 200, sent.text);
    assert.equal(sent.body.data.emails.length, 1);

    // A key a send used: the public key's request with it is its own, and never sees the send's recipients.
    const tracked = await track('welcome-ada-1');
    assert.equal((await send('welcome-ada-1')).status, 200);
    const trackedAgain = await track('welcome-ada-1');
    assert.equal(trackedAgain.status, 409, trackedAgain.text);
    assert.equal(trackedAgain.body.error.details.originalRequest, 'POST /v1/track');
    assert.deepEqual(trackedAgain.body.error.details.originalResponse, tracked.body);
    assert.doesNotMatch(trackedAgain.text, /receipt@example\.com/);
    const sentAgain = await send('welcome-ada-1');
    assert.equal(sentAgain.status, 409, sentAgain.text);
    assert.equal(sentAgain.body.error.details.originalRequest, 'POST /v1/send');
    const [{ n }] = await server.sql<{ n: number }>(
      `SELECT count(*)::int AS n FROM emails AS e JOIN contacts AS c ON c.id = e.contact_id WHERE c.project_id = $1 AND c.email = 'receipt@example.com'`,
      [b.project.id],
    );
    assert.equal(n, 2, 'each send performed once');
  });

  test('an invalid key is 422', async () => {
    const res = await b.pk.post('/v1/track', { email: 'a@example.com', event: 'x' }, { headers: { 'idempotency-key': 'é' } });
    assert.equal(res.status, 422);
    assert.equal(res.body.error.errors[0].field, 'Idempotency-Key');
  });
});

describe('one transaction', () => {
  test('when an after-track listener fails, neither the contact nor the event is written', async () => {
    const seen: string[] = [];
    const real = afterTrack.eventTracked;
    // The step has effects (as with a tracked segment), so the track runs in a transaction, not as one statement.
    const effects = mock.method(afterTrack, 'hasEffects', async () => true);
    const listener = mock.method(afterTrack, 'eventTracked', async (...args: Parameters<typeof real>) => {
      const event = args[2];
      seen.push(`${event.name}:${event.contact.email}`);
      if (event.name === 'explode') throw new Error('listener failed');
      await real(...args);
    });
    try {
      const ok = await b.pk.post('/v1/track', { email: 'listened@example.com', event: 'fine' });
      assert.equal(ok.status, 200);
      const failed = await b.pk.post('/v1/track', { email: 'rolled-back@example.com', event: 'explode', data: { a: 1 } });
      assert.equal(failed.status, 500);
      assert.equal(failed.body.error.code, 'INTERNAL_SERVER_ERROR');
    } finally {
      listener.mock.restore();
      effects.mock.restore();
    }
    assert.deepEqual(seen, ['fine:listened@example.com', 'explode:rolled-back@example.com']);
    assert.equal((await server.sql(`SELECT 1 FROM contacts WHERE email = 'rolled-back@example.com'`)).length, 0);
    assert.equal((await server.sql(`SELECT 1 FROM events WHERE name = 'explode'`)).length, 0);
  });
});

describe('one statement', () => {
  test('a contact another transaction changes while the track waits for its lock is read as changed: both changes are kept, one event', async () => {
    const created = await b.sk.post('/contacts', { email: 'raced@example.com', data: { a: 1 } });
    assert.equal(created.status, 201, created.text);
    // The track's statement waits for the contact's row lock while the other transaction changes it.
    const res = await whileAnotherTransaction(server, {
      hold: (other) => other.query(`SELECT 1 FROM contacts WHERE id = $1 FOR UPDATE`, [created.body.id]),
      request: () => b.pk.post('/v1/track', { email: 'raced@example.com', event: 'raced', data: { b: 2 } }),
      beforeCommit: (other) => other.query(`UPDATE contacts SET data = data || '{"c": 3}'::jsonb WHERE id = $1`, [created.body.id]),
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.data.contact, created.body.id);
    const [contact] = await server.sql<{ data: Record<string, unknown> }>(`SELECT data FROM contacts WHERE id = $1`, [created.body.id]);
    assert.deepEqual(contact.data, { a: 1, b: 2, c: 3 });
    const events = await eventsOf(created.body.id);
    assert.deepEqual(
      events.filter((e) => e.name === 'raced').map((e) => e.id),
      [res.body.data.event],
    );
  });
});

describe('one statement, more', () => {
  test('a contact another transaction creates while the track runs is left out and tracked again alone: one contact, both data, one event', async () => {
    // The track's insert of the same email waits for the other transaction's.
    const res = await whileAnotherTransaction(server, {
      hold: (other) =>
        other.query(
          `INSERT INTO contacts (id, project_id, email, subscribed, data, created_at, updated_at)
           VALUES ('cnt_born_meanwhile', $1, 'born@example.com', true, '{"a": 1}', now(), now())`,
          [b.project.id],
        ),
      request: () => b.pk.post('/v1/track', { email: 'born@example.com', event: 'born', data: { b: 2 } }),
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.data.contact, 'cnt_born_meanwhile');
    const contacts = await server.sql<{ id: string; data: Record<string, unknown> }>(`SELECT id, data FROM contacts WHERE email = 'born@example.com'`);
    assert.deepEqual(contacts, [{ id: 'cnt_born_meanwhile', data: { a: 1, b: 2 } }]);
    const events = await eventsOf('cnt_born_meanwhile');
    assert.deepEqual(
      events.filter((e) => e.name === 'born').map((e) => e.id),
      [res.body.data.event],
    );
  });

  // Both upserts: the grouped one of the one-statement track, and the one-by-one one of the
  // transaction a project with a tracked segment tracks in (as with hasEffects true).
  for (const path of ['one statement', 'a transaction'] as const) {
    test(`a track that changes nothing of its contact leaves the row as it was (no new row version); one that changes it writes it (${path})`, async () => {
      const effects = path === 'a transaction' ? mock.method(afterTrack, 'hasEffects', async () => true) : null;
      try {
        const email = `steady-${path.replace(' ', '-')}@example.com`;
        const created = await b.sk.post('/contacts', { email, data: { plan: 'pro' } });
        assert.equal(created.status, 201, created.text);
        const row = async () =>
          (
            await server.sql<{ xmin: string; updated_at: Date; data: unknown }>(`SELECT xmin::text, updated_at, data FROM contacts WHERE id = $1`, [
              created.body.id,
            ])
          )[0];
        const before = await row();
        for (const data of [{ plan: 'pro' }, {}, undefined]) {
          const res = await b.pk.post('/v1/track', { email, event: 'visit', ...(data ? { data } : {}) });
          assert.equal(res.status, 200, res.text);
          assert.equal(res.body.data.contact, created.body.id);
        }
        assert.deepEqual(await row(), before);
        const changed = await b.pk.post('/v1/track', { email, event: 'visit', data: { plan: 'team' } });
        assert.equal(changed.status, 200, changed.text);
        const after = await row();
        assert.notEqual(after.xmin, before.xmin);
        assert.deepEqual(after.data, { plan: 'team' });
        assert.ok(after.updated_at > before.updated_at);
        assert.equal((await eventsOf(created.body.id)).filter((e) => e.name === 'visit').length, 4);
      } finally {
        effects?.mock.restore();
      }
    });
  }
});

describe('browser use', () => {
  test('the OPTIONS preflight allows any origin, the headers a snippet sends, and no credentials', async () => {
    const res = await server.api.request('OPTIONS', '/v1/track', {
      headers: {
        origin: 'https://shop.example.org',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type',
      },
    });
    assert.equal(res.status, 204);
    assert.equal(res.headers.get('access-control-allow-origin'), '*');
    assert.match(res.headers.get('access-control-allow-methods') ?? '', /\bPOST\b/);
    const allowed = (res.headers.get('access-control-allow-headers') ?? '').toLowerCase();
    for (const h of ['authorization', 'content-type', 'idempotency-key']) assert.ok(allowed.includes(h), allowed);
    assert.equal(res.headers.get('access-control-allow-credentials'), null);
    assert.equal(res.headers.get('access-control-max-age'), '86400');
  });

  test('responses (successes and errors) carry Access-Control-Allow-Origin: *', async () => {
    const origin = { origin: 'https://shop.example.org' };
    const ok = await b.pk.post('/v1/track', { email: 'browser@example.com', event: 'click' }, { headers: origin });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get('access-control-allow-origin'), '*');
    assert.equal(ok.headers.get('access-control-allow-credentials'), null);
    assert.match(ok.headers.get('access-control-expose-headers') ?? '', /X-Request-ID/);
    const denied = await server.api.post('/v1/track', { email: 'a@example.com', event: 'x' }, { headers: origin });
    assert.equal(denied.status, 401);
    assert.equal(denied.headers.get('access-control-allow-origin'), '*');
    const invalid = await b.pk.post('/v1/track', { email: 'a@example.com', event: 'email.sent' }, { headers: origin });
    assert.equal(invalid.status, 422);
    assert.equal(invalid.headers.get('access-control-allow-origin'), '*');
  });

  test('dashboard endpoints do not answer CORS', async () => {
    const res = await b.sk.get('/events', { headers: { origin: 'https://shop.example.org' } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('access-control-allow-origin'), null);
  });

  test('public-key traffic has its own budget: it cannot exhaust the secret key', async () => {
    const limited = await startTestServer({ API_RATE_LIMIT_PER_MINUTE: '5' });
    try {
      const p = await bootstrap(limited.api);
      for (let i = 1; i <= 5; i++) {
        const res = await p.pk.post('/v1/track', { email: `rl${i}@example.com`, event: 'spam' });
        assert.equal(res.status, 200, res.text);
        assert.equal(res.headers.get('ratelimit-remaining'), String(5 - i));
      }
      const over = await p.pk.post('/v1/track', { email: 'rl6@example.com', event: 'spam' });
      assert.equal(over.status, 429);
      assert.equal(over.body.error.code, 'RATE_LIMIT_EXCEEDED');
      assert.equal(over.headers.get('access-control-allow-origin'), '*');
      const secret = await p.sk.get('/events');
      assert.equal(secret.status, 200, 'the secret key still has its whole budget');
      assert.equal(secret.headers.get('ratelimit-remaining'), '4');
      assert.equal(secret.body.total, 5);
    } finally {
      await limited.stop();
    }
  });
});
