import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { recomputeAllSegments } from '../src/modules/segments/membership.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

/**
 * The 5-minute segment job shares its run between projects: each gets a time budget past its first
 * segment (stalest first), the run stops at its own budget, so one tenant's slow segments cannot
 * keep the job from everyone else's.
 */

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server?.stop());

const everyone = { logic: 'AND', groups: [{ filters: [{ field: 'email', operator: 'contains', value: '@' }] }] };

/** Segments made while the project is empty (count 0); then one contact joins all of them, seen by the job only. */
async function projectWithSegments(names: string[]): Promise<{ p: Bootstrapped; ids: string[] }> {
  const p = await bootstrap(server.api);
  const ids: string[] = [];
  for (const name of names) {
    const made = await p.sk.post('/segments', { name, condition: everyone });
    assert.equal(made.status, 201, made.text);
    assert.equal(made.body.memberCount, 0);
    ids.push(made.body.id);
  }
  const contact = await p.sk.post('/contacts', { email: `someone@${names[0].toLowerCase().replace(/\W/g, '')}.example` });
  assert.equal(contact.status, 201, contact.text);
  return { p, ids };
}

const counts = async (p: Bootstrapped, ids: string[]) => Promise.all(ids.map(async (id) => (await p.sk.get(`/segments/${id}`)).body.memberCount as number));

test("a project's segments beyond its budget wait for the next run, stalest first; every project gets its turn", async () => {
  const hog = await projectWithSegments(['Hog one', 'Hog two', 'Hog three']);
  const other = await projectWithSegments(['Other one']);

  // A budget spent by each project's first segment: one segment of each project per run.
  await recomputeAllSegments(server.ctx, { runMs: 60_000, projectMs: 0 });
  assert.deepEqual(await counts(hog.p, hog.ids), [1, 0, 0]);
  assert.deepEqual(await counts(other.p, other.ids), [1]);

  await recomputeAllSegments(server.ctx, { runMs: 60_000, projectMs: 0 });
  assert.deepEqual(await counts(hog.p, hog.ids), [1, 1, 0], 'the stalest segment goes next');

  await recomputeAllSegments(server.ctx, { runMs: 60_000, projectMs: 60_000 });
  assert.deepEqual(await counts(hog.p, hog.ids), [1, 1, 1]);
});

test('a run stops at its budget: with none left after the first project, one segment in all is recomputed', async () => {
  await projectWithSegments(['Alpha one', 'Alpha two']);
  await projectWithSegments(['Beta one', 'Beta two']);
  const [{ before }] = await server.sql<{ before: Date }>('SELECT max(member_count_at) AS before FROM segments');
  await recomputeAllSegments(server.ctx, { runMs: 0, projectMs: 60_000 });
  const [{ n }] = await server.sql<{ n: number }>('SELECT count(*)::int AS n FROM segments WHERE member_count_at > $1', [before]);
  assert.equal(n, 1);
});
