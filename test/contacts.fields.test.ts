import assert from 'node:assert/strict';
import { after, before, describe, mock, test } from 'node:test';
import { COVERAGE_EXACT_UP_TO } from '../src/modules/contacts/fields.ts';
import { usage as usageOf } from '../src/modules/usage/service.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(async () => server?.stop());

describe('contact fields', () => {
  let b: Bootstrapped;
  before(async () => {
    b = await bootstrap(server.api);
    await b.sk.post('/contacts', { email: 'f1@example.com', data: { plan: 'pro', seats: 5, profile: { tier: 'gold' } } });
    await b.sk.post('/contacts', { email: 'f2@example.com', data: { plan: 'pro', seats: 2 } });
    await b.sk.post('/contacts', { email: 'f3@example.com', data: { plan: 'free' } });
    await b.sk.post('/contacts', { email: 'f4@example.com', subscribed: false });
  });

  test('GET /contacts/fields lists standard fields then custom ones with type and coverage', async () => {
    const res = await b.sk.get('/contacts/fields');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, {
      fields: [
        { field: 'email', type: 'string', isCustom: false, coverage: 1 },
        { field: 'subscribed', type: 'boolean', isCustom: false, coverage: 1 },
        { field: 'createdAt', type: 'date', isCustom: false, coverage: 1 },
        { field: 'updatedAt', type: 'date', isCustom: false, coverage: 1 },
        { field: 'data.plan', type: 'string', isCustom: true, coverage: 0.75 },
        { field: 'data.profile.tier', type: 'string', isCustom: true, coverage: 0.25 },
        { field: 'data.seats', type: 'number', isCustom: true, coverage: 0.5 },
      ],
    });
  });

  test('coverage counts a nested field where its path holds a value: not null, not a key named with its dots, not through a list', async () => {
    const fresh = await bootstrap(server.api);
    const writes = [
      { email: 'g1@example.com', data: { profile: { tier: 'gold', since: 2020 } } },
      { email: 'g2@example.com', data: { profile: { tier: null, since: 2021 } } },
      { email: 'g3@example.com', data: { dotted: 'later' } },
      { email: 'g4@example.com', data: { profile: [{ tier: 'listed' }] } },
      { email: 'g5@example.com', data: { other: { profile: { tier: 'elsewhere' } } } },
    ];
    for (const body of writes) {
      const res = await fresh.sk.post('/contacts', body);
      assert.equal(res.status, 201, res.text);
    }
    // A key named with a dot is refused since; one stored before the rule is written here directly.
    await server.sql(`UPDATE contacts SET data = '{"profile.tier": "dotted"}'::jsonb WHERE email = 'g3@example.com' AND project_id = $1`, [fresh.project.id]);
    const res = await fresh.sk.get('/contacts/fields');
    const coverage = Object.fromEntries(
      res.body.fields.filter((f: { isCustom: boolean }) => f.isCustom).map((f: { field: string; coverage: number }) => [f.field, f.coverage]),
    );
    assert.equal(coverage['data.profile.tier'], 0.2);
    assert.equal(coverage['data.profile.since'], 0.4);
  });

  test('past COVERAGE_EXACT_UP_TO contacts, coverage is the share among a hash bucket of them, within a fraction of a percent of the exact share', async () => {
    const big = await bootstrap(server.api);
    const n = COVERAGE_EXACT_UP_TO + 20_000; // two buckets: about 60,000 contacts read
    // Every contact has a plan; one in 7 is rare; one in 5 has a profile with a tier (the others a list); one in 3 has a null score.
    await server.sql(
      `INSERT INTO contacts (id, project_id, email, subscribed, data, created_at, updated_at)
       SELECT 'cnt_' || md5(g::text), $1, 'c' || g || '@example.com', true,
              jsonb_build_object('plan', 'pro', 'score', CASE WHEN g % 3 = 0 THEN NULL ELSE g END,
                                 'profile', CASE WHEN g % 5 = 0 THEN jsonb_build_object('tier', 'gold') ELSE '[{"tier": "listed"}]'::jsonb END)
              || CASE WHEN g % 7 = 0 THEN '{"rare": true}'::jsonb ELSE '{}'::jsonb END,
              now(), now()
         FROM generate_series(1, $2::int) AS g`,
      [big.project.id, n],
    );
    await server.sql(
      `INSERT INTO contact_fields (project_id, key, type) VALUES ($1, 'plan', 'string'), ($1, 'score', 'number'), ($1, 'profile.tier', 'string'), ($1, 'rare', 'boolean')`,
      [big.project.id],
    );
    const res = await big.sk.get('/contacts/fields');
    assert.equal(res.status, 200, res.text);
    const coverage: Record<string, number> = Object.fromEntries(
      res.body.fields.filter((f: { isCustom: boolean }) => f.isCustom).map((f: { field: string; coverage: number }) => [f.field, f.coverage]),
    );
    const [bucket] = await server.sql<{ read: number; score: number; tier: number; rare: number }>(
      `SELECT count(*)::int AS read,
              count(*) FILTER (WHERE jsonb_typeof(data -> 'score') <> 'null')::int AS score,
              count(*) FILTER (WHERE jsonb_typeof(data -> 'profile' -> 'tier') <> 'null')::int AS tier,
              count(*) FILTER (WHERE data ? 'rare')::int AS rare
         FROM contacts WHERE project_id = $1 AND (hashtext(id) & 1) = 0`,
      [big.project.id],
    );
    assert.ok(bucket.read > 50_000 && bucket.read < 70_000, `the bucket holds ${bucket.read} contacts`);
    assert.deepEqual(
      { ...coverage },
      {
        'data.plan': 1,
        'data.profile.tier': bucket.tier / bucket.read,
        'data.rare': bucket.rare / bucket.read,
        'data.score': bucket.score / bucket.read,
      },
    );
    const exact: Record<string, number> = { 'data.plan': 1, 'data.profile.tier': 1 / 5, 'data.rare': 1 / 7, 'data.score': 2 / 3 };
    for (const [field, share] of Object.entries(exact)) {
      assert.ok(Math.abs(coverage[field] - share) < 0.01, `${field}: ${coverage[field]} against ${share}`);
    }
  });

  test('a new project has only the standard fields', async () => {
    const fresh = await bootstrap(server.api);
    const res = await fresh.sk.get('/contacts/fields');
    assert.deepEqual(
      res.body.fields.map((f: { field: string }) => f.field),
      ['email', 'subscribed', 'createdAt', 'updatedAt'],
    );
  });

  test('GET /contacts/fields/:field/values gives distinct values, most frequent first', async () => {
    const plan = await b.sk.get('/contacts/fields/data.plan/values');
    assert.equal(plan.status, 200);
    assert.deepEqual(plan.body, { field: 'data.plan', values: ['pro', 'free'], count: 2 });
    const bare = await b.sk.get('/contacts/fields/plan/values?limit=1');
    assert.deepEqual(bare.body, { field: 'data.plan', values: ['pro'], count: 2 }, 'a bare name is a data field; count is all distinct values');
    const nested = await b.sk.get('/contacts/fields/data.profile.tier/values');
    assert.deepEqual(nested.body, { field: 'data.profile.tier', values: ['gold'], count: 1 });
    const subscribed = await b.sk.get('/contacts/fields/subscribed/values');
    assert.deepEqual(subscribed.body, { field: 'subscribed', values: [true, false], count: 2 });
    const unknown = await b.sk.get('/contacts/fields/data.nothing/values');
    assert.deepEqual(unknown.body, { field: 'data.nothing', values: [], count: 0 });
  });

  test('GET /contacts/fields/:field/usage has the decisions.md shape', async () => {
    const res = await b.sk.get('/contacts/fields/data.seats/usage');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { segments: [], campaigns: [], workflows: [], contactCount: 2, canDelete: true });
    const standard = await b.sk.get('/contacts/fields/email/usage');
    assert.deepEqual(standard.body, { segments: [], campaigns: [], workflows: [], contactCount: 4, canDelete: false });
  });

  test('a registered usage provider blocks DELETE with 409 and shows in usage', async () => {
    const real = usageOf.fieldUsers;
    const provider = mock.method(usageOf, 'fieldUsers', async (...args: Parameters<typeof real>) => {
      const found = await real(...args);
      const [, projectId, field] = args;
      return projectId === b.project.id && field === 'data.plan' ? { ...found, segments: [{ id: 'seg-1', name: 'Pro users' }] } : found;
    });
    try {
      const usage = await b.sk.get('/contacts/fields/data.plan/usage');
      assert.deepEqual(usage.body, {
        segments: [{ id: 'seg-1', name: 'Pro users' }],
        campaigns: [],
        workflows: [],
        contactCount: 3,
        canDelete: false,
      });
      const del = await b.sk.delete('/contacts/fields/data.plan');
      assert.equal(del.status, 409);
      assert.equal(del.body.error.code, 'CONFLICT');
      assert.deepEqual(del.body.error.details.segments, [{ id: 'seg-1', name: 'Pro users' }]);
      const still = await b.sk.get('/contacts/fields/data.plan/values');
      assert.deepEqual(still.body.values, ['pro', 'free'], 'nothing was deleted');
    } finally {
      provider.mock.restore();
    }
  });

  test('DELETE /contacts/fields/:field removes the field from every contact and forgets its type', async () => {
    const other = await bootstrap(server.api);
    await other.sk.post('/contacts', { email: 'keep@example.com', data: { seats: 9 } });

    const res = await b.sk.delete('/contacts/fields/data.seats');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { deletedFrom: 2 });
    const rows = await server.sql<{ data: Record<string, unknown> }>('SELECT data FROM contacts WHERE project_id = $1 ORDER BY email', [b.project.id]);
    assert.ok(rows.every((r) => !('seats' in r.data)));
    const fields = await b.sk.get('/contacts/fields');
    assert.ok(!fields.body.fields.some((f: { field: string }) => f.field === 'data.seats'));
    const otherProject = await other.sk.get('/contacts/fields/data.seats/values');
    assert.deepEqual(otherProject.body.values, [9], 'another project keeps its field');

    await b.sk.post('/contacts', { email: 'f1@example.com', data: { seats: 'many' } });
    const retyped = await b.sk.get('/contacts/fields');
    assert.deepEqual(
      retyped.body.fields.find((f: { field: string }) => f.field === 'data.seats'),
      { field: 'data.seats', type: 'string', isCustom: true, coverage: 0.25 },
      'a deleted field is typed afresh',
    );
  });

  test('DELETE of a parent object removes the nested fields under it', async () => {
    const res = await b.sk.delete('/contacts/fields/data.profile');
    assert.deepEqual(res.body, { deletedFrom: 1 });
    const fields = await b.sk.get('/contacts/fields');
    assert.ok(!fields.body.fields.some((f: { field: string }) => f.field.startsWith('data.profile')));
  });

  test('DELETE of a standard field is 400, of an unknown field 404', async () => {
    const std = await b.sk.delete('/contacts/fields/email');
    assert.equal(std.status, 400);
    assert.equal(std.body.error.code, 'BAD_REQUEST');
    const unknown = await b.sk.delete('/contacts/fields/data.nope');
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error.code, 'FIELD_NOT_FOUND');
  });
});
