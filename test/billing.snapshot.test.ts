import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Clock } from '../src/context.ts';
import { withTransaction } from '../src/db/client.ts';
import { assertWithinBillingLimit } from '../src/modules/billing/limits.ts';
import { type Category, monthUsage } from '../src/modules/billing/usage.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { waitFor } from './helpers/workflows.ts';

// The server's clock runs from a moment of our choosing (mid-month unless a test moves it), so the
// emails written here by SQL sit where each test needs them relative to the 10-minute fold margin.
let offsetMs = 0;
const clock: Clock = { now: () => new Date(Date.now() + offsetMs) };
const setNow = (at: Date) => (offsetMs = at.getTime() - Date.now());
const MIDMONTH = new Date(Date.UTC(2030, 4, 15, 12));

let s: TestServer;
before(async () => {
  setNow(MIDMONTH);
  s = await startTestServer({ API_RATE_LIMIT_PER_MINUTE: '100000' }, { clock });
});
after(async () => s?.stop());

const minutes = (n: number) => n * 60_000;
const ago = (ms: number) => new Date(clock.now().getTime() - ms);
const limitsPath = (b: Bootstrapped) => `/users/@me/projects/${b.project.id}/billing-limits`;

async function project(name: string, caps: Partial<Record<Category, number>>) {
  const b = await bootstrap(s.api, name);
  const put = await s.api.put(limitsPath(b), caps, { cookie: b.cookie });
  assert.equal(put.status, 200, put.text);
  const [{ id: content }] = await s.sql<{ id: string }>(
    `INSERT INTO email_contents (id, project_id, body_source) VALUES (gen_random_uuid(), $1, 'hi') RETURNING id`,
    [b.project.id],
  );
  return { ...b, content };
}
type Project = Awaited<ReturnType<typeof project>>;

/** `n` emails created at `at` (a SENDING one keeps a lease far ahead, so no worker takes it). */
async function seed(p: Project, n: number, at: Date, opts: { status?: string; category?: Category } = {}): Promise<string[]> {
  const status = opts.status ?? 'DELIVERED';
  const rows = await s.sql<{ id: string }>(
    `INSERT INTO emails (id, project_id, to_email, from_email, type, subject_source, content_id, status, campaign_id, workflow_id, locked_until, created_at, updated_at)
     SELECT gen_random_uuid(), $1, 'x' || g || '@example.test', 'a@sandbox.herald.test', 'TRANSACTIONAL', 'hi', $2, $3,
            CASE WHEN $4 = 'campaigns' THEN gen_random_uuid() END, CASE WHEN $4 = 'workflows' THEN gen_random_uuid() END,
            CASE WHEN $3 = 'SENDING' THEN '2100-01-01'::timestamptz END, $5, $5
       FROM generate_series(1, $6::int) AS g
     RETURNING id`,
    [p.project.id, p.content, status, opts.category ?? 'transactional', at.toISOString(), n],
  );
  return rows.map((r) => r.id);
}

type Snapshot = { counted_before: Date; period: string; transactional: number; campaigns: number; workflows: number; waiting: string[] };
const snapshots = (p: Project) =>
  s.sql<Snapshot>(
    `SELECT period, counted_before, transactional, campaigns, workflows, waiting::text[] AS waiting FROM billing_usage_snapshots WHERE project_id = $1 ORDER BY period`,
    [p.project.id],
  );

/** A capped writer's check, committed (it writes no email). */
const check = (p: Project, count: number, category: Category = 'transactional') =>
  withTransaction(s.ctx.database, (t) => assertWithinBillingLimit(s.ctx, t, p.project.id, category, count));
const usage = (p: Project) => monthUsage(s.ctx.database.db, p.project.id, clock.now());

describe('billing usage snapshot', () => {
  test('a capped check folds the emails older than 10 minutes into the snapshot; usage reads it plus the emails since', async () => {
    setNow(MIDMONTH);
    const p = await project('Fold', { transactional: 10_000 });
    await seed(p, 1500, ago(minutes(120)));
    await seed(p, 200, ago(minutes(120)), { status: 'SUPPRESSED' });
    await seed(p, 30, ago(minutes(120)), { status: 'SKIPPED' });
    await seed(p, 300, ago(minutes(90)), { category: 'campaigns' });
    await seed(p, 20, ago(minutes(60)), { category: 'workflows', status: 'BOUNCED' });
    await seed(p, 50, ago(minutes(1)));
    assert.deepEqual(await snapshots(p), [], 'no snapshot before a capped check');
    assert.deepEqual(await usage(p), { transactional: 1550, campaigns: 300, workflows: 20, inbound: 0 });

    const before = clock.now().getTime();
    await check(p, 1);
    const [snap] = await snapshots(p);
    assert.equal(snap.period, '2030-05');
    // The cut is 10 minutes before the check; the last 50 emails are younger and stay out.
    assert.ok(Math.abs(snap.counted_before.getTime() - (before - minutes(10))) < 5_000, `${snap.counted_before.toISOString()}`);
    assert.deepEqual(
      { transactional: snap.transactional, campaigns: snap.campaigns, workflows: snap.workflows, waiting: snap.waiting },
      { transactional: 1500, campaigns: 300, workflows: 20, waiting: [] },
    );
    assert.deepEqual(await usage(p), { transactional: 1550, campaigns: 300, workflows: 20, inbound: 0 });

    // The reads take the counts from the row: only the emails since counted_before are counted.
    await s.sql(`UPDATE billing_usage_snapshots SET transactional = transactional + 7 WHERE project_id = $1`, [p.project.id]);
    assert.equal((await usage(p)).transactional, 1557);
    const limits = await s.api.get(limitsPath(p), { cookie: p.cookie });
    assert.equal(limits.body.transactional.usage, 1557);
    await s.sql(`UPDATE billing_usage_snapshots SET transactional = transactional - 7 WHERE project_id = $1`, [p.project.id]);

    // Half an hour later, fewer than 1,000 emails lie between the row and the new cut: the next check leaves the row alone.
    await seed(p, 400, ago(minutes(5)));
    setNow(new Date(MIDMONTH.getTime() + minutes(30)));
    await check(p, 1);
    assert.deepEqual((await snapshots(p))[0].counted_before, snap.counted_before);
    assert.equal((await usage(p)).transactional, 1950);
  });

  test('the cap bites at exactly the limit with most of the usage in the snapshot', async () => {
    setNow(MIDMONTH);
    const p = await project('Exact', { transactional: 1203 });
    await seed(p, 1200, ago(minutes(60)));
    await check(p, 1);
    assert.equal((await snapshots(p))[0].transactional, 1200);
    await seed(p, 1, ago(minutes(1)));
    await check(p, 2); // 1201 + 2 = 1203: allowed
    await seed(p, 2, ago(minutes(1)));
    await assert.rejects(check(p, 1), (err: { statusCode: number; code: string; details: unknown }) => {
      assert.equal(err.statusCode, 403);
      assert.equal(err.code, 'BILLING_LIMIT_EXCEEDED');
      assert.deepEqual(err.details, { category: 'transactional', limit: 1203, usage: 1203, requested: 1, remaining: 0 });
      return true;
    });
    const send = await p.sk.post('/v1/send', { to: 'one@example.com', from: 'hello@sandbox.herald.test', subject: 's', body: 'b' });
    assert.equal(send.status, 403, send.text);
    assert.deepEqual(send.body.error.details, { category: 'transactional', limit: 1203, usage: 1203, requested: 1, remaining: 0 });
    // One more allowed: exactly one send goes through.
    await s.api.put(limitsPath(p), { transactional: 1204 }, { cookie: p.cookie });
    const ok = await p.sk.post('/v1/send', { to: 'two@example.com', from: 'hello@sandbox.herald.test', subject: 's', body: 'b' });
    assert.equal(ok.status, 200, ok.text);
    const again = await p.sk.post('/v1/send', { to: 'three@example.com', from: 'hello@sandbox.herald.test', subject: 's', body: 'b' });
    assert.equal(again.status, 403, again.text);
    assert.equal(again.body.error.details.usage, 1204);
  });

  test('emails still waiting at a fold are kept by id and counted as they settle', async () => {
    setNow(MIDMONTH);
    const p = await project('Waiting', { transactional: 10_000 });
    await seed(p, 1200, ago(minutes(120)));
    const waiting = await seed(p, 3, ago(minutes(60)), { status: 'SENDING' });
    await check(p, 1);
    let [snap] = await snapshots(p);
    assert.equal(snap.transactional, 1200);
    assert.deepEqual([...snap.waiting].sort(), [...waiting].sort());
    assert.equal((await usage(p)).transactional, 1203);

    // Delivery refuses two and sends one: usage follows at once.
    await s.sql(`UPDATE emails SET status = 'SUPPRESSED' WHERE id = ANY($1::uuid[])`, [waiting.slice(0, 2)]);
    await s.sql(`UPDATE emails SET status = 'SENT' WHERE id = $1`, [waiting[2]]);
    assert.equal((await usage(p)).transactional, 1201);

    // The next fold takes the settled ones in (the sent one counted, the refused ones not).
    await seed(p, 1000, ago(minutes(5)));
    setNow(new Date(MIDMONTH.getTime() + minutes(30)));
    await check(p, 1);
    [snap] = await snapshots(p);
    assert.equal(snap.transactional, 2201);
    assert.deepEqual(snap.waiting, []);
    assert.equal((await usage(p)).transactional, 2201);
  });

  test('at most 1,000 waiting emails are kept: the oldest beyond them are counted as sent', async () => {
    setNow(MIDMONTH);
    const p = await project('Backlog', { transactional: 10_000 });
    const oldest = await seed(p, 5, ago(minutes(180)), { status: 'SENDING' });
    const newer = await seed(p, 1000, ago(minutes(120)), { status: 'SENDING' });
    await check(p, 1);
    const [snap] = await snapshots(p);
    assert.equal(snap.transactional, 5);
    assert.equal(snap.waiting.length, 1000);
    assert.deepEqual([...snap.waiting].sort(), [...newer].sort());
    // One of the five counted ones refused later stays counted (the cap errs on its own side).
    await s.sql(`UPDATE emails SET status = 'SUPPRESSED' WHERE id = $1`, [oldest[0]]);
    assert.equal((await usage(p)).transactional, 1005);
  });

  test('a refused check still folds (in a transaction of its own), so refusals stop counting the month', async () => {
    setNow(MIDMONTH);
    const p = await project('Refused', { transactional: 100 });
    await seed(p, 1500, ago(minutes(60)));
    await assert.rejects(check(p, 1), (err: { code: string }) => err.code === 'BILLING_LIMIT_EXCEEDED');
    const [snap] = await waitFor('the snapshot row', async () => {
      const rows = await snapshots(p);
      return rows.length > 0 && rows;
    });
    assert.equal(snap.transactional, 1500);
    assert.equal((await usage(p)).transactional, 1500);
  });

  test('a reset carries only what the snapshot does not hold: usage unchanged, nothing counted twice', async () => {
    setNow(MIDMONTH);
    const p = await project('Reset', { transactional: 10_000, campaigns: 10_000 });
    await seed(p, 1200, ago(minutes(120)));
    await seed(p, 40, ago(minutes(120)), { category: 'campaigns' });
    const waiting = await seed(p, 2, ago(minutes(60)), { status: 'SENDING' });
    await check(p, 1);
    await seed(p, 5, ago(minutes(1)));
    assert.deepEqual(await usage(p), { transactional: 1207, campaigns: 40, workflows: 0, inbound: 0 });
    await s.sql(`UPDATE emails SET status = 'SENT' WHERE id = $1`, [waiting[0]]);
    await s.sql(`UPDATE emails SET status = 'SKIPPED' WHERE id = $1`, [waiting[1]]);

    const reset = await s.api.post(`/users/@me/projects/${p.project.id}/reset`, undefined, { cookie: p.cookie });
    assert.equal(reset.status, 200, reset.text);
    assert.equal((await s.sql<{ n: number }>(`SELECT count(*)::int AS n FROM emails WHERE project_id = $1`, [p.project.id]))[0].n, 0);
    const carry = await s.sql(`SELECT category, count FROM billing_usage_carry WHERE project_id = $1 ORDER BY category`, [p.project.id]);
    assert.deepEqual(carry, [{ category: 'transactional', count: 6 }]);
    assert.deepEqual(await usage(p), { transactional: 1206, campaigns: 40, workflows: 0, inbound: 0 });
    // A fold after the reset finds the deleted emails gone: it adds only the emails written since.
    const [{ id: content }] = await s.sql<{ id: string }>(
      `INSERT INTO email_contents (id, project_id, body_source) VALUES (gen_random_uuid(), $1, 'hi') RETURNING id`,
      [p.project.id],
    );
    await seed({ ...p, content }, 1000, ago(minutes(5)));
    setNow(new Date(MIDMONTH.getTime() + minutes(30)));
    await check(p, 1);
    const [snap] = await snapshots(p);
    assert.equal(snap.transactional, 2200);
    assert.deepEqual(snap.waiting, []);
    assert.deepEqual(await usage(p), { transactional: 2206, campaigns: 40, workflows: 0, inbound: 0 });
  });

  test("a new month starts from zero: the last month's emails and snapshot are not counted, its row goes at the first fold", async () => {
    setNow(MIDMONTH);
    const p = await project('Months', { transactional: 10_000 });
    await seed(p, 1200, ago(minutes(60)));
    await check(p, 1);
    assert.deepEqual(
      (await snapshots(p)).map((r) => r.period),
      ['2030-05'],
    );
    // Five minutes into June: no fold can pass the month's start yet; May's emails are not June's.
    setNow(new Date(Date.UTC(2030, 5, 1, 0, 5)));
    await seed(p, 3, ago(minutes(10))); // 23:55 on 31 May
    await seed(p, 1100, ago(minutes(4)));
    assert.equal((await usage(p)).transactional, 1100);
    await check(p, 1);
    assert.deepEqual(
      (await snapshots(p)).map((r) => r.period),
      ['2030-05'],
    );
    // Half an hour in: the fold writes June's row (from the month's start) and drops May's.
    setNow(new Date(Date.UTC(2030, 5, 1, 0, 30)));
    await check(p, 1);
    const rows = await snapshots(p);
    assert.deepEqual(
      rows.map((r) => [r.period, r.transactional]),
      [['2030-06', 1100]],
    );
    assert.ok(Math.abs(rows[0].counted_before.getTime() - Date.UTC(2030, 5, 1, 0, 20)) < 5_000, rows[0].counted_before.toISOString());
    assert.equal((await usage(p)).transactional, 1100);
  });
});
