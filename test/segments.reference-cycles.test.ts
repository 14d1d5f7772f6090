import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/**
 * A PATCH that adds `segment.<id>` references is checked for a cycle under a project-wide lock,
 * inside its transaction: of two concurrent PATCHes that would together form a cycle (A → B and
 * B → A), exactly one is stored and the other is a 400. Before, both were checked against the
 * other's old condition, both answered 200, and the stored cycle made both segments unreadable
 * (members, refresh, compute, PATCH: 400) and undeletable (409).
 */

let server: TestServer;
let b: Bootstrapped;
before(async () => {
  server = await startTestServer();
  b = await bootstrap(server.api, 'Reference cycles');
  for (const email of ['a@cy.test', 'b@cy.test']) assert.equal((await b.sk.post('/contacts', { email })).status, 201);
});
after(async () => server?.stop());

const memberOf = (segmentId: string) => ({ logic: 'AND', groups: [{ filters: [{ field: `segment.${segmentId}`, operator: 'memberOf' }] }] });
const emailContains = (value: string) => ({ logic: 'AND', groups: [{ filters: [{ field: 'email', operator: 'contains', value }] }] });

async function created(name: string): Promise<string> {
  const res = await b.sk.post('/segments', { name, condition: emailContains('@cy.test') });
  assert.equal(res.status, 201, res.text);
  return res.body.id;
}

/** The segments each stored condition references, as the database holds them. */
async function storedReferences(ids: string[]): Promise<Record<string, string[]>> {
  const rows = await server.sql<{ id: string; refs: string[] }>(
    `SELECT s.id, coalesce(array_agg(substr(f #>> '{}', 9)) FILTER (WHERE f IS NOT NULL), '{}') AS refs
       FROM segments AS s LEFT JOIN LATERAL jsonb_path_query(s.condition, 'strict $.**.field ? (@ starts with "segment.")') AS f ON true
      WHERE s.id = ANY($1::uuid[]) GROUP BY s.id`,
    [ids],
  );
  return Object.fromEntries(rows.map((r) => [r.id, r.refs]));
}

describe('concurrent PATCHes that would form a reference cycle', () => {
  test('of A → B and B → A at once, exactly one is stored (200) and the other is a 400; both segments stay usable', async () => {
    for (let round = 0; round < 5; round++) {
      const a = await created(`A${round}`);
      const z = await created(`B${round}`);
      const [toB, toA] = await Promise.all([
        b.sk.patch(`/segments/${a}`, { condition: memberOf(z) }),
        b.sk.patch(`/segments/${z}`, { condition: memberOf(a) }),
      ]);
      const statuses = [toB.status, toA.status];
      assert.deepEqual([...statuses].sort(), [200, 400], `round ${round}: ${toB.text} / ${toA.text}`);
      const [won, lost] = toB.status === 200 ? [a, z] : [z, a];
      const refused = toB.status === 400 ? toB : toA;
      assert.equal(refused.body.error.code, 'BAD_REQUEST');
      assert.match(refused.body.error.message, /form a cycle/);

      // The winner references the loser, the loser still has its own condition: no cycle stored.
      assert.deepEqual(await storedReferences([a, z]), { [won]: [lost], [lost]: [] }, `round ${round}`);
      for (const id of [a, z]) {
        const members = await b.sk.get(`/segments/${id}/contacts`);
        assert.equal(members.status, 200, members.text);
        assert.equal(members.body.total, 2);
        assert.equal((await b.sk.post(`/segments/${id}/refresh`, {})).status, 200);
      }
      // The referrer can go, then the segment it referenced.
      assert.equal((await b.sk.delete(`/segments/${won}`)).status, 204);
      assert.equal((await b.sk.delete(`/segments/${lost}`)).status, 204);
    }
  });
});
