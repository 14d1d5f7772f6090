import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/**
 * The condition engine through segments: member lists for every operator family (checked against
 * the expected contacts), and every kind of bad tree refused with a precise 400.
 */

const NOW = new Date('2024-06-15T12:00:00.000Z');
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
let clock = NOW.getTime();
const setClock = (ms: number) => {
  clock = ms;
};

let server: TestServer;
let b: Bootstrapped;
before(async () => {
  server = await startTestServer({}, { clock: { now: () => new Date(clock) } });
  b = await bootstrap(server.api);

  // Contacts, created at known instants.
  const people: [string, number, Record<string, unknown>, boolean?][] = [
    ['ada@example.com', -40 * DAY, { plan: 'pro', score: 90, vip: true, signup: '2024-05-01', seen: '2024-06-15T11:00:00.000Z', profile: { tier: 'gold' } }],
    ['bob@example.com', -10 * DAY, { plan: 'free', score: 10, vip: false, signup: '2023-01-01', seen: '2024-06-10T12:00:00.000Z' }, false],
    ['cy@example.com', -2 * DAY, { plan: 'Pro Plus', score: 50, profile: { tier: 'silver' } }],
    ['Dee@Example.org', -1 * HOUR, {}],
    ['eve@example.com', -5 * DAY, { plan: 'enterprise', score: '75', signup: '2024-05-01T23:59:59.999Z', profile: 'flat' }],
  ];
  for (const [email, offset, data, subscribed] of people) {
    setClock(NOW.getTime() + offset);
    const res = await b.sk.post('/contacts', { email, data, subscribed });
    assert.equal(res.status, 201, res.text);
  }
  // Events: ada logged in 3 times (1 h, 2 days, 20 days ago), bob once 10 days ago, cy signed up 30 days ago.
  const track = async (email: string, event: string, offset: number) => {
    setClock(NOW.getTime() + offset);
    const res = await b.pk.post('/v1/track', { email, event });
    assert.equal(res.status, 200, res.text);
  };
  await track('ada@example.com', 'login', -1 * HOUR);
  await track('ada@example.com', 'login', -2 * DAY);
  await track('ada@example.com', 'login', -20 * DAY);
  await track('bob@example.com', 'login', -10 * DAY);
  await track('cy@example.com', 'signup', -30 * DAY);
  setClock(NOW.getTime());
  // Email activity, written as the delivery pipeline would: bob opened one 3 days ago, cy was only sent one.
  const email = async (to: string, opened: number | null) => {
    const [c] = await server.sql<{ id: string }>('SELECT id FROM contacts WHERE project_id = $1 AND email = $2', [b.project.id, to]);
    await server.sql(
      `WITH c AS (INSERT INTO email_contents (id, project_id, body_source) VALUES (gen_random_uuid(), $2, 'b') RETURNING id)
       INSERT INTO emails (id, project_id, contact_id, to_email, from_email, type, subject_source, content_id, status, sent_at, opened_at)
       VALUES ($1, $2, $3, $4, 'news@example.com', 'MARKETING', 's', (SELECT id FROM c), 'DELIVERED', $5, $6)`,
      [randomUUID(), b.project.id, c.id, to, new Date(NOW.getTime() - 4 * DAY), opened === null ? null : new Date(NOW.getTime() + opened)],
    );
  };
  await email('bob@example.com', -3 * DAY);
  await email('cy@example.com', null);
});
after(async () => server?.stop());

type Tree = { logic: string; groups: unknown[] };
const one = (filter: Record<string, unknown>): Tree => ({ logic: 'AND', groups: [{ filters: [filter] }] });

/** The member emails of a new segment with this condition, sorted. */
async function members(condition: Tree): Promise<string[]> {
  const created = await b.sk.post('/segments', { name: `s-${randomUUID().slice(0, 8)}`, condition });
  assert.equal(created.status, 201, created.text);
  const res = await b.sk.get(`/segments/${created.body.id}/contacts?pageSize=100`);
  assert.equal(res.status, 200, res.text);
  assert.equal(res.body.total, res.body.data.length);
  assert.equal(created.body.memberCount, res.body.total, 'memberCount is the count when the segment was saved');
  return res.body.data.map((c: { email: string }) => c.email.split('@')[0]).sort();
}

const ALL = ['ada', 'bob', 'cy', 'dee', 'eve'];
const except = (...names: string[]) => ALL.filter((n) => !names.includes(n));

describe('member lists by operator family', () => {
  test('string: equals is exact on data, case-insensitive on email; contains/startsWith/endsWith ignore case', async () => {
    assert.deepEqual(await members(one({ field: 'data.plan', operator: 'equals', value: 'pro' })), ['ada']);
    assert.deepEqual(await members(one({ field: 'data.plan', operator: 'equals', value: 'PRO' })), []);
    assert.deepEqual(await members(one({ field: 'email', operator: 'equals', value: 'DEE@example.ORG' })), ['dee']);
    assert.deepEqual(await members(one({ field: 'data.plan', operator: 'contains', value: 'PRO' })), ['ada', 'cy']);
    assert.deepEqual(await members(one({ field: 'data.plan', operator: 'startsWith', value: 'pro p' })), ['cy']);
    assert.deepEqual(await members(one({ field: 'data.plan', operator: 'endsWith', value: 'PRISE' })), ['eve']);
    assert.deepEqual(await members(one({ field: 'email', operator: 'endsWith', value: '@EXAMPLE.com' })), except('dee'));
    assert.deepEqual(await members(one({ field: 'data.plan', operator: 'in', value: ['free', 'enterprise', 'nope'] })), ['bob', 'eve']);
  });

  test('negative operators are the exact complement: missing values match them', async () => {
    assert.deepEqual(await members(one({ field: 'data.plan', operator: 'notEquals', value: 'pro' })), except('ada'));
    assert.deepEqual(await members(one({ field: 'data.plan', operator: 'notContains', value: 'pro' })), ['bob', 'dee', 'eve']);
    assert.deepEqual(await members(one({ field: 'data.plan', operator: 'notIn', value: ['pro', 'free'] })), ['cy', 'dee', 'eve']);
  });

  test('number: compares numerically, a numeric string value is accepted, a stored string is not a number', async () => {
    assert.deepEqual(await members(one({ field: 'data.score', operator: 'greaterThan', value: 40 })), ['ada', 'cy']);
    assert.deepEqual(await members(one({ field: 'data.score', operator: 'gt', value: '40' })), ['ada', 'cy']);
    assert.deepEqual(await members(one({ field: 'data.score', operator: 'gte', value: 50 })), ['ada', 'cy']);
    assert.deepEqual(await members(one({ field: 'data.score', operator: 'lessThan', value: 50 })), ['bob']);
    assert.deepEqual(await members(one({ field: 'data.score', operator: 'lte', value: '50.0' })), ['bob', 'cy']);
    assert.deepEqual(await members(one({ field: 'data.score', operator: 'equals', value: '90' })), ['ada']);
    assert.deepEqual(await members(one({ field: 'data.score', operator: 'in', value: [10, 75] })), ['bob']);
    assert.deepEqual(await members(one({ field: 'data.score', operator: 'notEquals', value: 90 })), except('ada'));
  });

  test('boolean: true/false and their strings', async () => {
    assert.deepEqual(await members(one({ field: 'subscribed', operator: 'equals', value: false })), ['bob']);
    assert.deepEqual(await members(one({ field: 'subscribed', operator: 'equals', value: 'true' })), except('bob'));
    assert.deepEqual(await members(one({ field: 'data.vip', operator: 'equals', value: true })), ['ada']);
    assert.deepEqual(await members(one({ field: 'data.vip', operator: 'notEquals', value: true })), except('ada'));
  });

  test('date: a YYYY-MM-DD value is the whole UTC day; instants compare to the millisecond', async () => {
    assert.deepEqual(await members(one({ field: 'data.signup', operator: 'equals', value: '2024-05-01' })), ['ada', 'eve']);
    assert.deepEqual(await members(one({ field: 'data.signup', operator: 'greaterThan', value: '2024-04-30' })), ['ada', 'eve']);
    assert.deepEqual(await members(one({ field: 'data.signup', operator: 'gt', value: '2024-05-01' })), []);
    assert.deepEqual(await members(one({ field: 'data.signup', operator: 'lt', value: '2024-05-01T12:00:00Z' })), ['ada', 'bob']);
    assert.deepEqual(await members(one({ field: 'data.signup', operator: 'lte', value: '2024-05-01' })), ['ada', 'bob', 'eve']);
    assert.deepEqual(await members(one({ field: 'createdAt', operator: 'equals', value: '2024-06-13' })), ['cy']);
  });

  test('within / olderThan: now - value·unit ≤ field ≤ now, and field < now - value·unit; full date-times only', async () => {
    assert.deepEqual(await members(one({ field: 'createdAt', operator: 'within', value: 3, unit: 'days' })), ['cy', 'dee']);
    assert.deepEqual(await members(one({ field: 'createdAt', operator: 'within', value: 2, unit: 'days' })), ['cy', 'dee'], 'the edge is included');
    assert.deepEqual(await members(one({ field: 'createdAt', operator: 'olderThan', value: 1, unit: 'weeks' })), ['ada', 'bob']);
    assert.deepEqual(await members(one({ field: 'createdAt', operator: 'within', value: 90, unit: 'minutes' })), ['dee']);
    assert.deepEqual(await members(one({ field: 'data.seen', operator: 'within', value: 2, unit: 'hours' })), ['ada']);
    assert.deepEqual(await members(one({ field: 'data.seen', operator: 'olderThan', value: 1, unit: 'days' })), ['bob']);
    assert.deepEqual(
      await members(one({ field: 'data.signup', operator: 'olderThan', value: 1, unit: 'days' })),
      ['eve'],
      'a date without time is not an instant for within/olderThan',
    );
  });

  test('within moves with the clock (time is injectable)', async () => {
    const created = await b.sk.post('/segments', { name: 'recent', condition: one({ field: 'createdAt', operator: 'within', value: 3, unit: 'days' }) });
    assert.equal(created.body.memberCount, 2);
    setClock(NOW.getTime() + 2 * DAY);
    try {
      const later = await b.sk.get(`/segments/${created.body.id}/contacts`);
      assert.deepEqual(
        later.body.data.map((c: { email: string }) => c.email),
        ['dee@example.org'],
      );
      assert.deepEqual((await b.sk.post(`/segments/${created.body.id}/refresh`)).body, { memberCount: 1 });
    } finally {
      setClock(NOW.getTime());
    }
  });

  test('exists / notExists, also on nested data paths (objects only)', async () => {
    assert.deepEqual(await members(one({ field: 'data.vip', operator: 'exists' })), ['ada', 'bob']);
    assert.deepEqual(await members(one({ field: 'data.vip', operator: 'notExists' })), ['cy', 'dee', 'eve']);
    assert.deepEqual(await members(one({ field: 'data.profile.tier', operator: 'equals', value: 'gold' })), ['ada']);
    assert.deepEqual(await members(one({ field: 'data.profile.tier', operator: 'exists' })), ['ada', 'cy']);
    assert.deepEqual(await members(one({ field: 'data.profile', operator: 'exists' })), ['ada', 'cy', 'eve']);
    assert.deepEqual(await members(one({ field: 'email', operator: 'exists' })), ALL);
  });

  test('tracked events: triggered, within a window, last occurrence older than, counts', async () => {
    assert.deepEqual(await members(one({ field: 'event.login', operator: 'triggered' })), ['ada', 'bob']);
    assert.deepEqual(await members(one({ field: 'event.login', operator: 'notTriggered' })), ['cy', 'dee', 'eve']);
    assert.deepEqual(await members(one({ field: 'event.login', operator: 'triggeredWithin', value: 1, unit: 'weeks' })), ['ada']);
    assert.deepEqual(await members(one({ field: 'event.login', operator: 'notTriggeredWithin', value: 1, unit: 'weeks' })), except('ada'));
    assert.deepEqual(await members(one({ field: 'event.login', operator: 'triggeredOlderThan', value: 7, unit: 'days' })), ['bob']);
    assert.deepEqual(await members(one({ field: 'event.signup', operator: 'triggeredOlderThan', value: 7, unit: 'days' })), ['cy']);
    assert.deepEqual(await members(one({ field: 'event.login', operator: 'countAtLeast', value: 3 })), ['ada']);
    assert.deepEqual(await members(one({ field: 'event.login', operator: 'countAtLeast', value: 2, unit: 'weeks' })), ['ada']);
    assert.deepEqual(await members(one({ field: 'event.login', operator: 'countAtLeast', value: 1, unit: 'hours' })), ['ada'], 'the last hour, edge included');
    assert.deepEqual(await members(one({ field: 'event.login', operator: 'countAtLeast', value: 2, unit: 'days' })), []);
    assert.deepEqual(await members(one({ field: 'event.login', operator: 'countAtLeast', value: { count: 1, within: 2 }, unit: 'hours' })), ['ada']);
  });

  test('email activity: email.<activity> reads the contact’s emails', async () => {
    assert.deepEqual(await members(one({ field: 'email.sent', operator: 'triggered' })), ['bob', 'cy']);
    assert.deepEqual(await members(one({ field: 'email.opened', operator: 'triggered' })), ['bob']);
    assert.deepEqual(await members(one({ field: 'email.opened', operator: 'triggeredWithin', value: 2, unit: 'days' })), []);
    assert.deepEqual(await members(one({ field: 'email.opened', operator: 'notTriggeredWithin', value: 7, unit: 'days' })), except('bob'));
    assert.deepEqual(await members(one({ field: 'email.clicked', operator: 'notTriggered' })), ALL);
  });

  test('segment membership: memberOf / notMemberOf a static or a dynamic segment', async () => {
    const vip = await b.sk.post('/segments', { name: 'VIP list', type: 'STATIC' });
    await b.sk.post(`/segments/${vip.body.id}/members`, { emails: ['eve@example.com', 'dee@example.org'] });
    const pro = await b.sk.post('/segments', { name: 'Pro', condition: one({ field: 'data.plan', operator: 'contains', value: 'pro' }) });
    assert.deepEqual(await members(one({ field: `segment.${vip.body.id}`, operator: 'memberOf' })), ['dee', 'eve']);
    assert.deepEqual(await members(one({ field: `segment.${pro.body.id}`, operator: 'notMemberOf' })), ['bob', 'dee', 'eve']);
    assert.deepEqual(
      await members({
        logic: 'OR',
        groups: [
          { filters: [{ field: `segment.${vip.body.id}`, operator: 'memberOf' }] },
          { filters: [{ field: `segment.${pro.body.id}`, operator: 'memberOf' }] },
        ],
      }),
      ['ada', 'cy', 'dee', 'eve'],
    );
  });

  test('logic: filters of a group AND, groups combine with the tree logic, nested trees', async () => {
    const proAndActive = {
      filters: [
        { field: 'data.plan', operator: 'contains', value: 'pro' },
        { field: 'event.login', operator: 'triggered' },
      ],
    };
    assert.deepEqual(await members({ logic: 'AND', groups: [proAndActive] }), ['ada']);
    assert.deepEqual(await members({ logic: 'OR', groups: [proAndActive, { filters: [{ field: 'subscribed', operator: 'equals', value: false }] }] }), [
      'ada',
      'bob',
    ]);
    assert.deepEqual(
      await members({
        logic: 'AND',
        groups: [
          {
            filters: [{ field: 'email', operator: 'endsWith', value: 'example.com' }],
            conditions: {
              logic: 'OR',
              groups: [
                { filters: [{ field: 'data.score', operator: 'gt', value: 80 }] },
                { filters: [{ field: 'data.plan', operator: 'equals', value: 'enterprise' }] },
              ],
            },
          },
        ],
      }),
      ['ada', 'eve'],
    );
    assert.deepEqual(await members({ logic: 'AND', groups: [{ filters: [], conditions: one({ field: 'data.vip', operator: 'exists' }) }] }), ['ada', 'bob']);
  });
});

describe('bad condition trees: 400 BAD_REQUEST naming the place, field and operator', () => {
  async function refused(condition: unknown) {
    const res = await b.sk.post('/segments', { name: 'bad', condition });
    assert.equal(res.status, 400, res.text);
    assert.equal(res.body.success, false);
    assert.equal(res.body.error.code, 'BAD_REQUEST');
    return res.body.error as { message: string; details: { path: string; field?: string; operator?: string } };
  }

  test('an unknown operator', async () => {
    const e = await refused(one({ field: 'data.plan', operator: 'like', value: 'p%' }));
    assert.match(e.message, /Unknown operator 'like' on field 'data\.plan'.*equals/);
    assert.deepEqual(e.details, { path: 'groups[0].filters[0]', field: 'data.plan', operator: 'like' });
  });

  test('an operator that does not fit the field type', async () => {
    let e = await refused(one({ field: 'data.score', operator: 'contains', value: '9' }));
    assert.match(e.message, /Operator 'contains' does not apply to number field 'data\.score'/);
    assert.equal(e.details.operator, 'contains');
    e = await refused(one({ field: 'email', operator: 'greaterThan', value: 'a' }));
    assert.match(e.message, /'greaterThan' does not apply to string field 'email'/);
    e = await refused(one({ field: 'createdAt', operator: 'triggered' }));
    assert.match(e.message, /'triggered' does not apply to date field 'createdAt'/);
    e = await refused(one({ field: 'event.login', operator: 'equals', value: 'x' }));
    assert.match(e.message, /'equals' does not apply to event and email field 'event\.login'.*triggered/);
    e = await refused(one({ field: 'data.vip', operator: 'in', value: [true] }));
    assert.match(e.message, /'in' does not apply to boolean field 'data\.vip'/);
  });

  test('within without a unit, or with an unknown one', async () => {
    let e = await refused(one({ field: 'createdAt', operator: 'within', value: 3 }));
    assert.match(e.message, /Operator 'within' on date field 'createdAt' needs a unit: minutes, hours, days, weeks/);
    assert.deepEqual(e.details, { path: 'groups[0].filters[0]', field: 'createdAt', operator: 'within' });
    e = await refused(one({ field: 'createdAt', operator: 'within', value: 3, unit: 'months' }));
    assert.match(e.message, /invalid unit 'months'/);
    e = await refused(one({ field: 'event.login', operator: 'triggeredWithin', value: 'soon', unit: 'days' }));
    assert.match(e.message, /needs a non-negative number of days, got 'soon'/);
  });

  test("a value of no type greaterThan compares: the types it compares, not a guess at the field's", async () => {
    const e = await refused(one({ field: 'data.score', operator: 'greaterThan', value: 'lots' }));
    assert.equal(e.message, "Operator 'greaterThan' on field 'data.score' needs a number or a date (YYYY-MM-DD or an ISO 8601 date-time), got 'lots'");
    assert.deepEqual(e.details, { path: 'groups[0].filters[0]', field: 'data.score', operator: 'greaterThan' });
    // A date field: its impossible date and a boolean were told they needed a number.
    for (const value of ['2024-02-30', true]) {
      const date = await refused(one({ field: 'data.signup', operator: 'gt', value }));
      assert.match(date.message, /^Operator 'gt' on field 'data\.signup' needs a number or a date /, date.message);
    }
  });

  test('other values that do not fit: a bad date, a non-array for in, a missing value', async () => {
    assert.match((await refused(one({ field: 'data.signup', operator: 'equals', value: '2024-02-30' }))).message, /needs a date/);
    assert.match((await refused(one({ field: 'data.plan', operator: 'in', value: 'pro' }))).message, /needs an array of 1 to 1000 values/);
    assert.match((await refused(one({ field: 'data.plan', operator: 'equals' }))).message, /needs a string value, got null/);
    assert.match((await refused(one({ field: 'data.vip', operator: 'equals', value: 'yes' }))).message, /needs true or false value/);
    assert.equal(
      (await refused(one({ field: 'data.plan', operator: 'equals', value: 'p'.repeat(1001) }))).message,
      "The value of operator 'equals' on string field 'data.plan' is 1,001 characters long; at most 1,000 are compared",
    );
    assert.equal(
      (await refused(one({ field: 'data.plan', operator: 'in', value: ['pro', 'p'.repeat(2000)] }))).message,
      "value[1] of operator 'in' on string field 'data.plan' is 2,000 characters long; at most 1,000 are compared",
    );
  });

  test("logic: 'XOR'", async () => {
    const e = await refused({ logic: 'XOR', groups: [{ filters: [{ field: 'email', operator: 'exists' }] }] });
    assert.match(e.message, /logic must be 'AND' or 'OR', got 'XOR'/);
    assert.equal(e.details.path, 'logic');
  });

  test('a group with nothing in it, and a tree without groups', async () => {
    let e = await refused({ logic: 'AND', groups: [{ filters: [{ field: 'email', operator: 'exists' }] }, { filters: [] }] });
    assert.match(e.message, /groups\[1\] is empty: a group needs at least one filter or a nested condition/);
    assert.equal(e.details.path, 'groups[1]');
    e = await refused({ logic: 'AND', groups: [] });
    assert.match(e.message, /groups must be a non-empty array/);
  });

  test('50 levels of nesting are refused (at most 10)', async () => {
    let tree: Tree = one({ field: 'email', operator: 'exists' });
    for (let i = 0; i < 49; i++) tree = { logic: 'AND', groups: [{ filters: [], conditions: tree }] };
    const e = await refused(tree);
    assert.match(e.message, /nested deeper than 10 levels/);
    // Ten levels are fine.
    let ten: Tree = one({ field: 'email', operator: 'exists' });
    for (let i = 0; i < 9; i++) ten = { logic: 'AND', groups: [{ filters: [], conditions: ten }] };
    assert.deepEqual(await members(ten), ALL);
  });

  test('unknown fields and malformed field names', async () => {
    let e = await refused(one({ field: 'plan', operator: 'equals', value: 'pro' }));
    assert.match(e.message, /Unknown field 'plan': use email, subscribed, createdAt, updatedAt, data\.<key>/);
    e = await refused(one({ field: 'data.', operator: 'exists' }));
    assert.match(e.message, /data\.<key> needs a key/);
    e = await refused(one({ field: 'email.forwarded', operator: 'triggered' }));
    assert.match(e.message, /email activities are sent, delivered, opened, clicked, bounced, complained/);
    e = await refused(one({ field: 'segment.42', operator: 'memberOf' }));
    assert.match(e.message, /segment\.<id> needs a segment id/);
  });

  test('a field name carrying SQL is one harmless JSON key', async () => {
    const key = "a'; drop table contacts;--";
    const res = await b.sk.post('/contacts', { email: 'sql@example.com', data: { [key]: 'yes' } });
    assert.equal(res.status, 201, res.text);
    assert.deepEqual(await members(one({ field: `data.${key}`, operator: 'equals', value: 'yes' })), ['sql']);
    assert.deepEqual(await members(one({ field: `data.${key}"; select 1; --`, operator: 'exists' })), []);
    const [{ n }] = await server.sql<{ n: number }>('SELECT count(*)::int AS n FROM contacts WHERE project_id = $1', [b.project.id]);
    assert.equal(n, 6, 'the contacts table is intact');
    await b.sk.delete(`/contacts/${res.body.id}`);
  });

  test('a segment referencing itself, a cycle, and a segment that does not exist', async () => {
    const a = await b.sk.post('/segments', { name: 'A', condition: one({ field: 'email', operator: 'exists' }) });
    let res = await b.sk.patch(`/segments/${a.body.id}`, { condition: one({ field: `segment.${a.body.id}`, operator: 'memberOf' }) });
    assert.equal(res.status, 400, res.text);
    assert.match(res.body.error.message, /A segment cannot reference itself/);
    assert.equal(res.body.error.details.field, `segment.${a.body.id}`);

    const bSeg = await b.sk.post('/segments', { name: 'B', condition: one({ field: `segment.${a.body.id}`, operator: 'memberOf' }) });
    assert.equal(bSeg.status, 201, bSeg.text);
    res = await b.sk.patch(`/segments/${a.body.id}`, { condition: one({ field: `segment.${bSeg.body.id}`, operator: 'notMemberOf' }) });
    assert.equal(res.status, 400, res.text);
    assert.match(res.body.error.message, /Segment references form a cycle: this segment → 'B' → this segment/);

    const missing = randomUUID();
    const e = await refused(one({ field: `segment.${missing}`, operator: 'memberOf' }));
    assert.match(e.message, new RegExp(`Segment ${missing} referenced by field 'segment\\.${missing}' at groups\\[0\\]\\.filters\\[0\\] does not exist`));
  });

  test('the condition of a DYNAMIC segment is required and must be an object: simple { error } body', async () => {
    for (const body of [{ name: 'x' }, { name: 'x', condition: null }, { name: 'x', condition: 'data.plan = pro' }, { name: 'x', condition: [] }]) {
      const res = await b.sk.post('/segments', body);
      assert.equal(res.status, 400, res.text);
      assert.deepEqual(res.body, { error: 'condition is required for a DYNAMIC segment and must be an object' });
    }
  });
});
