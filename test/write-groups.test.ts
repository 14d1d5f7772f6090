import assert from 'node:assert/strict';
import { after, before, describe, mock, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { CommitOutcomeUnknown } from '../src/db/client.ts';
import { LEFT_OUT, groupShareOfData, writeGroups } from '../src/db/write-groups.ts';
import { afterTrack } from '../src/modules/events/after-track.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { verifyDomain } from './helpers/domains.ts';
import { type MailEnv, startMailEnv } from './helpers/mail.ts';
import { recordStatements } from './helpers/statements.ts';
import { waitFor } from './helpers/workflows.ts';

/**
 * Concurrent /v1/track, /v1/send and POST /contacts requests of one project commit together (db/write-groups.ts).
 * Rows written by one transaction share `xmin`, which is how these tests see that grouping
 * happened; everything else is asserted as a user sees it.
 */

let env: MailEnv;
let server: MailEnv['server'];

before(async () => {
  env = await startMailEnv();
  server = env.server;
});
after(async () => env?.stop());

const transactionsOf = async (table: 'events' | 'emails', projectId: string, where = 'true') =>
  (await server.sql<{ n: number }>(`SELECT count(DISTINCT xmin::text)::int AS n FROM ${table} WHERE project_id = $1 AND ${where}`, [projectId]))[0].n;

/**
 * Runs `requests` while `table` is locked, and unlocks it once two of them wait for it: the
 * project's two write slots are then taken, so the rest queue and go in groups.
 */
async function queuedBehindLock<T>(table: 'events' | 'contacts', requests: () => Promise<T>): Promise<T> {
  const blocker = await server.ctx.database.pool.connect();
  try {
    await blocker.query('BEGIN');
    await blocker.query(`LOCK TABLE ${table} IN EXCLUSIVE MODE`);
    const pending = requests();
    await waitFor('both slots waiting for the lock', async () => {
      const [{ n }] = await server.sql<{ n: number }>(`SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND relation = $1::regclass`, [table]);
      return n >= 2;
    });
    await sleep(300);
    await blocker.query('COMMIT');
    return await pending;
  } finally {
    blocker.release();
  }
}

const eventCounts = (projectId: string) =>
  server.sql<{ name: string; n: number }>(`SELECT name, count(*)::int AS n FROM events WHERE project_id = $1 GROUP BY name ORDER BY name`, [projectId]);

/** Contact `i` of a grouped test holds the data of one of its own writes `ns`, merged: `plan` set, `keep` kept (deleted for 5–9). */
function assertMerged(c: { email: string; data: Record<string, unknown> }, i: number, ns: number[]): void {
  assert.equal(c.data.plan, 'pro');
  assert.ok(ns.includes(c.data.n as number), `${c.email} holds n=${c.data.n}, one of its own`);
  if (i < 20) assert.equal(c.data.keep, i >= 5 && i < 10 ? undefined : i, c.email);
}

describe('grouped /v1/track', () => {
  let b: Bootstrapped;
  before(async () => {
    b = await bootstrap(server.api);
  });

  test('300 concurrent tracks over 60 contacts commit in fewer transactions with the one-by-one rules', async () => {
    // Existing contacts: 0–9 subscribed, 10–19 unsubscribed, with data to merge into.
    for (let i = 0; i < 20; i++) {
      const res = await b.sk.post('/contacts', { email: `g${i}@example.com`, subscribed: i < 10, data: { plan: 'free', keep: i } });
      assert.equal(res.status, 201, res.text);
    }
    const sent = Array.from({ length: 300 }, (_, n) => {
      const i = n % 60;
      // Existing 0–9 are unsubscribed by every one of their tracks; 10–19 ask (from a public key) to be
      // subscribed, which must not re-subscribe them; 20–59 are new.
      const subscribed = i < 10 ? false : i < 20 ? true : undefined;
      // Contacts 5–9 also lose `keep` (null deletes a key).
      const data = i >= 5 && i < 10 ? { n, plan: 'pro', keep: null } : { n, plan: 'pro' };
      return { email: i % 2 ? `G${i}@Example.com` : `g${i}@example.com`, event: 'grouped', subscribed, data };
    });
    // A track is one short statement: unhindered, most would find a free slot and go alone.
    const responses = await queuedBehindLock('events', () => Promise.all(sent.map((body) => b.pk.post('/v1/track', body))));
    for (const res of responses) assert.equal(res.status, 200, res.text);
    const eventIds = new Set(responses.map((r) => r.body.data.event));
    assert.equal(eventIds.size, 300);

    // 2 alone, then groups of at most one track per contact (60): 7 at the fewest.
    const transactions = await transactionsOf('events', b.project.id, `name = 'grouped'`);
    assert.ok(transactions >= 7 && transactions < 200, `300 tracks in ${transactions} transactions`);

    const contacts = await server.sql<{ email: string; id: string; subscribed: boolean; data: Record<string, unknown> }>(
      `SELECT email, id, subscribed, data FROM contacts WHERE project_id = $1 ORDER BY email`,
      [b.project.id],
    );
    assert.equal(contacts.length, 60);
    for (const c of contacts) {
      const i = Number(c.email.slice(1, c.email.indexOf('@')));
      const ns = sent
        .map((s, n) => ({ s, n }))
        .filter(({ s }) => s.email.toLowerCase() === c.email)
        .map(({ n }) => n);
      assert.equal(ns.length, 5);
      // Each of the contact's responses names this contact.
      for (const n of ns) assert.equal(responses[n].body.data.contact, c.id, c.email);
      assertMerged(c, i, ns);
      assert.equal(c.subscribed, i >= 20, c.email);
    }
    const counts = await eventCounts(b.project.id);
    // One unsubscription each for contacts 0–9, whatever group their first track landed in.
    assert.deepEqual(counts, [
      { name: 'contact.unsubscribed', n: 10 },
      { name: 'grouped', n: 300 },
    ]);
  });

  test('a request that fails inside a group fails alone: the others are written, it writes nothing', async () => {
    const real = afterTrack.eventTracked;
    // The step has effects (as with a tracked segment), so the tracks run in transactions, not one statement each.
    const effects = mock.method(afterTrack, 'hasEffects', async () => true);
    const listener = mock.method(afterTrack, 'eventTracked', async (...args: Parameters<typeof real>) => {
      if (args[2].name === 'explode') throw new Error('listener failed');
      await real(...args);
    });
    let responses;
    try {
      responses = await Promise.all(
        Array.from({ length: 120 }, (_, n) => b.pk.post('/v1/track', { email: `f${n}@example.com`, event: n % 40 === 7 ? 'explode' : 'fine' })),
      );
    } finally {
      listener.mock.restore();
      effects.mock.restore();
    }
    const failed = responses.flatMap((r, n) => (r.status === 200 ? [] : [{ n, status: r.status, code: r.body.error?.code }]));
    assert.deepEqual(
      failed,
      [7, 47, 87].map((n) => ({ n, status: 500, code: 'INTERNAL_SERVER_ERROR' })),
    );
    const written = await server.sql<{ email: string }>(`SELECT email FROM contacts WHERE project_id = $1 AND email LIKE 'f%' ORDER BY email`, [b.project.id]);
    assert.equal(written.length, 117);
    assert.ok(!written.some((c) => ['f7@example.com', 'f47@example.com', 'f87@example.com'].includes(c.email)));
    assert.equal((await server.sql(`SELECT 1 FROM events WHERE project_id = $1 AND name = 'explode'`, [b.project.id])).length, 0);
    assert.equal((await server.sql(`SELECT 1 FROM events WHERE project_id = $1 AND name = 'fine'`, [b.project.id])).length, 117);
  });
});

describe('grouped POST /contacts', () => {
  let b: Bootstrapped;
  before(async () => {
    b = await bootstrap(server.api);
  });

  test('200 concurrent upserts over 50 emails commit in fewer statements with the one-by-one rules; one past the data bound fails alone', async () => {
    // Existing contacts: 0–9 subscribed, 10–19 unsubscribed, with data to merge into.
    for (let i = 0; i < 20; i++) {
      const res = await b.sk.post('/contacts', { email: `c${i}@example.com`, subscribed: i < 10, data: { plan: 'free', keep: i } });
      assert.equal(res.status, 201, res.text);
    }
    // A contact near the data bound (1 MB as JSON): one more chunk of 240 KB takes it over.
    const chunk = '\u0001'.repeat(40_000);
    for (let k = 0; k < 4; k++)
      assert.equal((await b.sk.post('/contacts', { email: 'big@example.com', data: { [`k${k}`]: chunk } })).status, k === 0 ? 201 : 200);
    const sent = Array.from({ length: 200 }, (_, n) => {
      const i = n % 50;
      // 0–9 are unsubscribed by each of their upserts, 10–19 subscribed again; 20–49 are new.
      const subscribed = i < 10 ? false : i < 20 ? true : undefined;
      const data = i >= 5 && i < 10 ? { n, plan: 'pro', keep: null } : { n, plan: 'pro' };
      return { email: i % 2 ? `C${i}@Example.com` : `c${i}@example.com`, subscribed, data };
    });
    const statements = recordStatements();
    const from = statements.texts.length;
    const [responses, tooBig] = await queuedBehindLock('contacts', () =>
      Promise.all([Promise.all(sent.map((body) => b.sk.post('/contacts', body))), b.sk.post('/contacts', { email: 'big@example.com', data: { k4: chunk } })]),
    );
    assert.equal(tooBig.status, 422, tooBig.text);
    assert.equal(tooBig.body.error.errors[0].code, 'too_big');
    const upserts = statements.texts.slice(from).filter((t) => /INSERT INTO contacts/.test(t));
    const grouped = upserts.filter((t) => t.includes('SELECT * FROM upserted'));
    assert.ok(grouped.length > 0 && upserts.length < 150, `201 upserts in ${upserts.length} statements, ${grouped.length} of them grouped`);

    const contacts = await server.sql<{ email: string; id: string; subscribed: boolean; data: Record<string, unknown> }>(
      `SELECT email, id, subscribed, data FROM contacts WHERE project_id = $1 AND email LIKE 'c%' ORDER BY email`,
      [b.project.id],
    );
    assert.equal(contacts.length, 50);
    for (const c of contacts) {
      const i = Number(c.email.slice(1, c.email.indexOf('@')));
      const ns = sent.flatMap((s, n) => (s.email.toLowerCase() === c.email ? [n] : []));
      assert.equal(ns.length, 4);
      const mine = ns.map((n) => responses[n]);
      for (const res of mine) {
        assert.equal(res.body.id, c.id, c.email);
        assert.equal(res.status, res.body._meta.isNew ? 201 : 200, res.text);
      }
      // A new contact is created by exactly one of its upserts; an existing one by none.
      assert.equal(mine.filter((r) => r.body._meta.isNew).length, i >= 20 ? 1 : 0, c.email);
      assert.ok(
        mine.every((r) => r.body._meta.isNew || r.body._meta.isUpdate),
        `${c.email}: each upsert changed n`,
      );
      assertMerged(c, i, ns);
      assert.equal(c.subscribed, i >= 10, c.email);
    }
    // One subscription change each for contacts 0–19, whatever group their first upsert landed in.
    const counts = await eventCounts(b.project.id);
    assert.deepEqual(counts, [
      { name: 'contact.subscribed', n: 10 },
      { name: 'contact.unsubscribed', n: 10 },
    ]);
    const [big] = await server.sql<{ keys: string[] }>(
      `SELECT array(SELECT jsonb_object_keys(data) ORDER BY 1) AS keys FROM contacts WHERE project_id = $1 AND email = 'big@example.com'`,
      [b.project.id],
    );
    assert.deepEqual(big.keys, ['k0', 'k1', 'k2', 'k3'], 'the refused write changed nothing');
  });

  test('requests carrying much data go in smaller groups: a group holds at most 100 shares, one per request and one per 16 KB of its data', async () => {
    const statements = recordStatements();
    const from = statements.texts.length;
    const data = { blob: 'x'.repeat(100 * 1024) }; // a share of 1 + 6 = 7: at most 14 requests a group
    assert.equal(groupShareOfData(100 * 1024 + 11), 7);
    const responses = await queuedBehindLock('contacts', () =>
      Promise.all(Array.from({ length: 60 }, (_, i) => b.sk.post('/contacts', { email: `heavy${i}@example.com`, data }))),
    );
    assert.deepEqual(
      responses.map((r) => r.status),
      Array(60).fill(201),
    );
    const groupSizes = statements.texts
      .slice(from)
      .flatMap((t, i) => (t.includes('SELECT * FROM upserted') ? [(JSON.parse(statements.params[from + i][1] as string) as unknown[]).length] : []));
    assert.ok(groupSizes.length > 0, 'some went in groups');
    assert.ok(Math.max(...groupSizes) <= 14, `group sizes ${groupSizes.join(', ')}`);
  });
});

describe('grouped /v1/send', () => {
  let b: Bootstrapped;
  const from = 'hello@groups.example.test';
  before(async () => {
    b = await bootstrap(server.api, 'Groups');
    await verifyDomain(b.sk, env.dns, 'groups.example.test');
  });

  test('200 concurrent sends over 40 contacts: every recipient gets exactly one message, in fewer transactions', async () => {
    // Single sends, and pairs that share contacts with the singles (so groups must keep them apart).
    const requests = Array.from({ length: 200 }, (_, n) => ({
      to: n % 5 === 0 ? [`s${n % 40}@example.com`, `s${(n + 1) % 40}@example.com`] : `s${n % 40}@example.com`,
      from,
      subject: 'Order {{n}}',
      body: '<p>Order {{n}} for {{plan}}</p>',
      data: { n: { value: n, persistent: false }, plan: 'pro' },
    }));
    const responses = await Promise.all(requests.map((body) => b.sk.post('/v1/send', body)));
    for (const res of responses) assert.equal(res.status, 200, res.text);
    const expected = requests.flatMap((r, n) => (Array.isArray(r.to) ? r.to : [r.to]).map((to) => ({ to, n })));
    assert.equal(expected.length, 240);

    const ids = new Set<string>();
    for (const [n, res] of responses.entries()) {
      const to = Array.isArray(requests[n].to) ? requests[n].to : [requests[n].to];
      assert.deepEqual(
        res.body.data.emails.map((e: { contact: { email: string }; status: string }) => [e.contact.email, e.status]),
        to.map((t) => [t, 'QUEUED']),
      );
      for (const e of res.body.data.emails) ids.add(e.email);
    }
    assert.equal(ids.size, 240);
    const transactions = await transactionsOf('emails', b.project.id);
    assert.ok(transactions < 150, `200 sends in ${transactions} transactions`);

    const ours = () => env.sink.messages.filter((m) => /^s\d+@example\.com$/.test(m.envelope.to[0]));
    for (const deadline = Date.now() + 60_000; ours().length < 240 && Date.now() < deadline;) await sleep(100);
    await sleep(1_000); // a second copy of anything would arrive by now
    const got = ours()
      .map((m) => `${m.envelope.to[0]} ${m.parsed.subject}`)
      .sort();
    assert.deepEqual(got, expected.map(({ to, n }) => `${to} Order ${n}`).sort());
    const contacts = await server.sql<{ email: string; data: Record<string, unknown>; subscribed: boolean }>(
      `SELECT email, data, subscribed FROM contacts WHERE project_id = $1 ORDER BY email`,
      [b.project.id],
    );
    assert.equal(contacts.length, 40);
    // Persistent data is stored, one-off data is not; /v1/send creates contacts unsubscribed.
    for (const c of contacts) assert.deepEqual([c.data, c.subscribed], [{ plan: 'pro' }, false], c.email);
  });

  test('one Idempotency-Key sent 20 times at once performs once', async () => {
    const body = { to: 'idem@example.com', from, subject: 'Once', body: '<p>Once</p>' };
    const responses = await Promise.all(Array.from({ length: 20 }, () => b.sk.post('/v1/send', body, { headers: { 'idempotency-key': 'grouped-once' } })));
    assert.deepEqual(responses.map((r) => r.status).sort(), [200, ...Array(19).fill(409)]);
    const rows = await server.sql(`SELECT 1 FROM emails WHERE project_id = $1 AND to_email = 'idem@example.com'`, [b.project.id]);
    assert.equal(rows.length, 1);
  });

  test('a billing cap reached inside a group: exactly the allowance is sent, the rest are 403', async () => {
    const capped = await bootstrap(server.api, 'Capped');
    await verifyDomain(capped.sk, env.dns, 'capped.example.test');
    const put = await server.api.as({ cookie: capped.cookie }).put(`/users/@me/projects/${capped.project.id}/billing-limits`, { transactional: 30 });
    assert.equal(put.status, 200, put.text);
    const responses = await Promise.all(
      Array.from({ length: 80 }, (_, n) =>
        capped.sk.post('/v1/send', { to: `c${n}@example.com`, from: 'hi@capped.example.test', subject: 'Hi', body: '<p>Hi</p>' }),
      ),
    );
    const statuses = responses.map((r) => r.status);
    assert.equal(statuses.filter((s) => s === 200).length, 30);
    assert.equal(statuses.filter((s) => s === 403).length, 50);
    for (const r of responses) if (r.status === 403) assert.equal(r.body.error.code, 'BILLING_LIMIT_EXCEEDED');
    const rows = await server.sql(`SELECT 1 FROM emails WHERE project_id = $1`, [capped.project.id]);
    assert.equal(rows.length, 30);
  });
});

describe('writeGroups (the collector alone)', () => {
  /** One request holds the only slot until released; the rest queue and go as one group. */
  async function run(runMany: (inputs: number[]) => Promise<(string | typeof LEFT_OUT)[]>, runOne: (n: number) => Promise<string>) {
    const gate = Promise.withResolvers<void>();
    const calls: string[] = [];
    const groups = writeGroups<number, string>({
      maxInFlight: 1,
      maxSize: 100,
      conflictKeys: (n) => [String(n % 10)],
      runOne: async (n) => {
        calls.push(`one ${n}`);
        if (n === 0) await gate.promise;
        return runOne(n);
      },
      runMany: async (inputs) => {
        calls.push(`many ${inputs.join(',')}`);
        return runMany(inputs);
      },
    });
    const results = [0, 1, 2, 11].map((n) =>
      groups.submit('p', n).then(
        (v) => ({ ok: v }),
        (err: Error) => ({ err: err.constructor.name }),
      ),
    );
    await new Promise((r) => setImmediate(r));
    gate.resolve();
    return { results: await Promise.all(results), calls };
  }

  test('waiting requests go as one group, a conflicting one waits for the next', async () => {
    const { results, calls } = await run(
      async (inputs) => inputs.map((n) => `g${n}`),
      async (n) => `o${n}`,
    );
    assert.deepEqual(calls, ['one 0', 'many 1,2', 'one 11']);
    assert.deepEqual(results, [{ ok: 'o0' }, { ok: 'g1' }, { ok: 'g2' }, { ok: 'o11' }]);
  });

  test('a failed group runs each request alone; a deadlock victim runs again', async () => {
    let deadlocks = 1;
    const { results, calls } = await run(
      async () => {
        throw new Error('one bad request');
      },
      async (n) => {
        if (n === 2 && deadlocks-- > 0) throw Object.assign(new Error('deadlock detected'), { code: '40P01' });
        return `o${n}`;
      },
    );
    assert.deepEqual(calls, ['one 0', 'many 1,2', 'one 1', 'one 2', 'one 2', 'one 11']);
    assert.deepEqual(results, [{ ok: 'o0' }, { ok: 'o1' }, { ok: 'o2' }, { ok: 'o11' }]);
  });

  test('a request a committed group left out runs alone; the others keep their results', async () => {
    const { results, calls } = await run(
      async (inputs) => inputs.map((n) => (n === 2 ? LEFT_OUT : `g${n}`)),
      async (n) => `o${n}`,
    );
    assert.deepEqual(calls, ['one 0', 'many 1,2', 'one 2', 'one 11']);
    assert.deepEqual(results, [{ ok: 'o0' }, { ok: 'g1' }, { ok: 'o2' }, { ok: 'o11' }]);
  });

  test('a group whose COMMIT may have happened is not run again: each request gets the error', async () => {
    const { results, calls } = await run(
      async () => {
        throw new CommitOutcomeUnknown(new Error('Connection terminated unexpectedly'));
      },
      async (n) => `o${n}`,
    );
    assert.deepEqual(calls, ['one 0', 'many 1,2', 'one 11']);
    assert.deepEqual(results, [{ ok: 'o0' }, { err: 'CommitOutcomeUnknown' }, { err: 'CommitOutcomeUnknown' }, { ok: 'o11' }]);
  });
});
