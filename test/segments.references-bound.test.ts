import assert from 'node:assert/strict';
import { after, before, describe, mock, test } from 'node:test';
import { type ReferencedSegment, checkReferences } from '../src/conditions/references.ts';
import type { Condition } from '../src/conditions/types.ts';
import { recomputeAllSegments, reevaluateContact } from '../src/modules/segments/membership.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { watchProcess as watched } from './helpers/process-watch.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/**
 * `segment.<id>` references are inlined by the SQL compiler at every reference, so a chain of
 * wide references multiplies: the expanded size of a condition is bounded (1,000 filters),
 * checked when a condition is validated, when a referenced segment changes, and before compiling.
 */

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(async () => server?.stop());

/** References per level of the chains below: 30 × 30 × 30 is past the bound, 30 × 30 is not. */
const WIDE = 30;

const refsTo = (segmentId: string, n: number): Condition => ({
  logic: 'AND',
  groups: [{ filters: Array.from({ length: n }, () => ({ field: `segment.${segmentId}`, operator: 'memberOf' })) }],
});
const emailContains = (value: string): Condition => ({ logic: 'AND', groups: [{ filters: [{ field: 'email', operator: 'contains', value }] }] });

async function created(b: Bootstrapped, name: string, condition: Condition): Promise<string> {
  const res = await b.sk.post('/segments', { name, condition });
  assert.equal(res.status, 201, res.text);
  return res.body.id;
}

/** s0 (the contacts of `domain`) ← s1 ← s2 ← s3, each one reference to the level below. */
async function chain(b: Bootstrapped, domain: string): Promise<string[]> {
  const ids = [await created(b, 's0', emailContains(domain))];
  for (let level = 1; level <= 3; level++) ids.push(await created(b, `s${level}`, refsTo(ids[level - 1], 1)));
  return ids;
}

/** Writes a condition as an older version would have stored it, past today's checks. */
async function storeCondition(segmentId: string, condition: Condition): Promise<void> {
  await server.sql('UPDATE segments SET condition = $2::jsonb WHERE id = $1', [segmentId, JSON.stringify(condition)]);
}

/** The parts of an error body this file asserts (it also carries statusCode and requestId). */
const errorOf = (res: { body: { error: { code: string; message: string; details?: unknown } } }) => {
  const { code, message, details } = res.body.error;
  return { code, message, details };
};

const expansionMessage = (total: number, field: string, path: string, alone: number) =>
  `Condition expands to ${total} filters through its segment references, more than 1000 (field '${field}' at ${path} alone expands to ${alone})`;

describe('the expanded size of segment references', () => {
  test('widening a chain top-down is refused at the PATCH that would take a segment above it past 1,000 filters', async () => {
    const b = await bootstrap(server.api);
    const [s0, s1, s2, s3] = await chain(b, '@wide.example');

    let res = await b.sk.patch(`/segments/${s3}`, { condition: refsTo(s2, 100) });
    assert.equal(res.status, 200, res.text); // s3: 100 × 1 × 1

    res = await b.sk.patch(`/segments/${s2}`, { condition: refsTo(s1, 100) }); // s3 would be 100 × 100
    assert.equal(res.status, 400, res.text);
    assert.deepEqual(errorOf(res), {
      code: 'BAD_REQUEST',
      message: `Segment 's3' (${s3}) references this segment and would expand to 10000 filters through its segment references, more than 1000`,
      details: { path: 'condition' },
    });
    assert.deepEqual((await b.sk.get(`/segments/${s2}`)).body.condition, refsTo(s1, 1), 'the refused PATCH saved nothing');

    res = await b.sk.patch(`/segments/${s2}`, { condition: refsTo(s1, 10) }); // s3: 100 × 10 = 1000, the bound itself
    assert.equal(res.status, 200, res.text);

    res = await b.sk.patch(`/segments/${s1}`, { condition: refsTo(s0, 2) }); // s2 would be 20 (fine), s3 2000
    assert.equal(res.status, 400, res.text);
    assert.equal(
      res.body.error.message,
      `Segment 's3' (${s3}) references this segment and would expand to 2000 filters through its segment references, more than 1000`,
    );

    // A new condition that is itself too wide names its widest reference.
    res = await b.sk.post('/segments', { name: 'top', condition: refsTo(s3, 2) });
    assert.equal(res.status, 400, res.text);
    assert.deepEqual(errorOf(res), {
      code: 'BAD_REQUEST',
      message: expansionMessage(2000, `segment.${s3}`, 'groups[0].filters[0]', 1000),
      details: { path: 'groups[0].filters[0]', field: `segment.${s3}`, operator: 'memberOf' },
    });
  });

  test('POST /segments/count of a tree past the bound answers 400 at once, without building it', async () => {
    const b = await bootstrap(server.api);
    await b.sk.post('/contacts', { email: 'ann@count.example' });
    const [s0, s1, s2] = await chain(b, '@count.example');
    await storeCondition(s1, refsTo(s0, WIDE)); // s1: 30
    await storeCondition(s2, refsTo(s1, WIDE)); // s2: 900

    const { result: res, ms, stallMs, rssMB } = await watched(() => b.sk.post('/segments/count', { condition: refsTo(s2, WIDE) }));
    assert.equal(res.status, 400, res.text);
    assert.deepEqual(errorOf(res), {
      code: 'BAD_REQUEST',
      message: expansionMessage(27000, `segment.${s2}`, 'groups[0].filters[0]', 900),
      details: { path: 'groups[0].filters[0]', field: `segment.${s2}`, operator: 'memberOf' },
    });
    assert.ok(ms < 1000, `answered in ${Math.round(ms)} ms`);
    assert.ok(stallMs < 250, `the event loop stalled ${Math.round(stallMs)} ms`);
    assert.ok(rssMB < 50, `the process grew ${Math.round(rssMB)} MB`);

    const within = await b.sk.post('/segments/count', { condition: refsTo(s2, 1) }); // 900: compiled as before
    assert.deepEqual([within.status, within.body], [200, { count: 1 }]);
  });

  test('a stored segment past the bound answers 400 on contacts and refresh; the jobs skip it and go on with the others', async () => {
    const b = await bootstrap(server.api);
    const [s0, s1, s2, s3] = await chain(b, '@stored.example');
    await storeCondition(s1, refsTo(s0, WIDE)); // 30
    await storeCondition(s2, refsTo(s1, WIDE)); // 900
    await storeCondition(s3, refsTo(s2, WIDE)); // 27,000: stored before the bound
    await server.sql(`UPDATE segments SET track_membership = true WHERE id = ANY($1::uuid[])`, [[s2, s3]]);
    const contact = await b.sk.post('/contacts', { email: 'bea@stored.example' });
    assert.equal(contact.status, 201, contact.text);
    const over = {
      code: 'BAD_REQUEST',
      message: expansionMessage(27000, `segment.${s2}`, 'groups[0].filters[0]', 900),
      details: { path: 'groups[0].filters[0]', field: `segment.${s2}`, operator: 'memberOf' },
    };

    const listed = await watched(() => b.sk.get(`/segments/${s3}/contacts`));
    assert.equal(listed.result.status, 400, listed.result.text);
    assert.deepEqual(errorOf(listed.result), over);
    assert.ok(listed.stallMs < 250, `the event loop stalled ${Math.round(listed.stallMs)} ms`);
    const refreshed = await b.sk.post(`/segments/${s3}/refresh`, {});
    assert.equal(refreshed.status, 400, refreshed.text);
    assert.deepEqual(errorOf(refreshed), over);

    const warn = mock.method(server.ctx.log, 'warn');
    try {
      await reevaluateContact(server.ctx, b.project.id, contact.body.id);
      await recomputeAllSegments(server.ctx);
    } finally {
      warn.mock.restore();
    }
    const counts = await server.sql<{ id: string; member_count: number }>(
      'SELECT id, member_count FROM segments WHERE id = ANY($1::uuid[]) ORDER BY created_at, id',
      [[s0, s1, s2, s3]],
    );
    assert.deepEqual(
      counts.map((r) => r.member_count),
      [1, 1, 1, 0],
      'the others counted bea; s3 kept its count',
    );
    const tracked = await server.sql<{ segment_id: string }>('SELECT segment_id FROM segment_members WHERE contact_id = $1', [contact.body.id]);
    assert.deepEqual(
      tracked.map((r) => r.segment_id),
      [s2],
      'the tracked s2 took bea in; s3 was skipped',
    );

    const logged = warn.mock.calls.map((c) => c.arguments as unknown[]);
    const aboutS3 = logged.filter(([fields]) => (fields as { segmentId?: string }).segmentId === s3);
    assert.deepEqual(
      [...new Set(aboutS3.map(([, msg]) => msg))].sort(), // the debounced re-evaluation of bea may log its own skip
      ['segment recompute failed', 'segment skipped: its condition cannot be evaluated'],
    );
    for (const [fields] of aboutS3) {
      assert.equal((fields as { error: { message: string } }).error.message, over.message);
      assert.ok(!JSON.stringify(fields).includes('stored.example'), 'no contact data or condition value in the log');
    }

    // The way out: a narrower condition is accepted, and the segment works again.
    const fixed = await b.sk.patch(`/segments/${s3}`, { condition: refsTo(s2, 1) });
    assert.equal(fixed.status, 200, fixed.text);
    assert.equal(fixed.body.memberCount, 1);
  });

  test('checkReferences walks each referenced segment once', () => {
    // s0 ← s1 ← … ← s4, each segment 8 references to the one below: 8^4 chains from the top.
    const ids = Array.from({ length: 5 }, (_, i) => `00000000-0000-7000-8000-00000000000${i}`);
    const segments = new Map<string, ReferencedSegment>(
      ids.map((id, i) => [id, { id, name: `s${i}`, type: 'DYNAMIC', condition: i === 0 ? emailContains('x') : refsTo(ids[i - 1], 8) }]),
    );
    let lookups = 0;
    const refs = new (class extends Map<string, ReferencedSegment> {
      override get(key: string) {
        lookups++;
        return super.get(key);
      }
    })(segments);
    checkReferences(refsTo(ids[4], 8), refs, undefined);
    assert.ok(lookups < 100, `${lookups} segment lookups`);

    // The same answers as before: a chain one level too deep, and a cycle.
    const deeper = `00000000-0000-7000-8000-000000000005`;
    refs.set(deeper, { id: deeper, name: 's5', type: 'DYNAMIC', condition: refsTo(ids[4], 8) });
    assert.throws(() => checkReferences(refsTo(deeper, 2), refs, undefined), {
      message: `Segment references are nested deeper than 5 levels (field 'segment.${deeper}' at groups[0].filters[0])`,
    });
    assert.throws(() => checkReferences(refsTo(ids[4], 2), refs, ids[1]), {
      message: `Segment references form a cycle: this segment → 's4' → 's3' → 's2' → this segment`,
    });
  });
  test('at most 20 event.* and email.* filters, counted through references too (each is a subquery PostgreSQL plans)', async () => {
    const b = await bootstrap(server.api);
    const events = (n: number): Condition => ({
      logic: 'AND',
      groups: [{ filters: Array.from({ length: n }, (_, i) => ({ field: `event.e${i}`, operator: 'triggeredOlderThan', value: 1, unit: 'days' })) }],
    });
    const direct = await b.sk.post('/segments/count', { condition: events(21) });
    assert.equal(direct.status, 400, direct.text);
    assert.equal(direct.body.error.message, 'Condition has 21 event.* and email.* filters, more than 20');
    assert.equal((await b.sk.post('/segments/count', { condition: events(20) })).status, 200);

    const ten = await created(b, 'ten events', events(10));
    const through = await b.sk.post('/segments/count', { condition: refsTo(ten, 3) });
    assert.equal(through.status, 400, through.text);
    assert.equal(
      through.body.error.message,
      `Condition expands to 30 event.* and email.* filters through its segment references, more than 20 (field 'segment.${ten}' at groups[0].filters[0] alone expands to 10)`,
    );
    // Widening a referenced segment is refused for the segments that reference it.
    const top = await created(b, 'two of them', refsTo(ten, 2));
    const widened = await b.sk.patch(`/segments/${ten}`, { condition: events(11) });
    assert.equal(widened.status, 400, widened.text);
    assert.match(widened.body.error.message, new RegExp(`Segment 'two of them' \\(${top}\\) references this segment and would expand to 22 event`));
    // One stored before the bound still reads as itself: a reference to it is refused, not read as matching nobody.
    await storeCondition(ten, events(21));
    const stored = await b.sk.post('/segments/count', { condition: refsTo(ten, 1) });
    assert.equal(stored.status, 400, stored.text);
    assert.match(stored.body.error.message, /^Condition expands to 21 event\.\* and email\.\* filters/);
  });
});
