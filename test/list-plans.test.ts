import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { executionsPageQuery } from '../src/modules/workflows/executions.ts';
import type { WorkflowExecutionStatus } from '../src/db/schema/workflows.ts';
import { type Bootstrapped, bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';
import { buildWorkflow } from './helpers/workflows.ts';
import { encodeCursor } from '../src/http/cursor.ts';
import { PgDialect } from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { sentCampaignsQuery } from '../src/modules/analytics/service.ts';
import { emailsPageQuery } from '../src/modules/emails/service.ts';

/**
 * How the lists read their pages, from the plans of their own statements (EXPLAIN).
 *
 * The executions list of one status reads that status's own index entries, whichever status is
 * rare: a workflow whose paths mostly EXIT has few COMPLETED executions, and `?status=COMPLETED`
 * walked every other execution of the workflow to fill its page (about 100 ms a million, and a
 * hostile project could ask it in a loop; docs/decisions.md § Hardening).
 */

let server: TestServer;
let deepCursorWorkflow: { id: string; sk: Bootstrapped['sk'] } | undefined;
before(async () => {
  server = await startTestServer();
});
after(async () => {
  await server?.stop();
});

/** The indexes the plan of a page of `status` reads (EXPLAIN of the list's own statement). */
async function indexesRead(workflowId: string, status: WorkflowExecutionStatus): Promise<string[]> {
  const { sql, params } = executionsPageQuery(server.ctx.database.db, workflowId, { status, limit: 50 }).toSQL();
  const [row] = await server.sql<{ 'QUERY PLAN': [{ Plan: Record<string, unknown> }] }>(`EXPLAIN (FORMAT JSON) ${sql}`, params);
  const indexes = (node: Record<string, unknown>): string[] => [
    ...(typeof node['Index Name'] === 'string' ? [node['Index Name']] : []),
    ...((node.Plans as Record<string, unknown>[] | undefined) ?? []).flatMap(indexes),
  ];
  return indexes(row['QUERY PLAN'][0].Plan).filter((name) => name.startsWith('workflow_executions'));
}

test('a page of a rare ending, COMPLETED too, is read from that ending’s index entries', async () => {
  const p = await bootstrap(server.api, 'ended');
  const w = await buildWorkflow(p.sk, {
    eventName: 'signup',
    allowReentry: true,
    steps: [{ key: 'wait', type: 'DELAY', config: { amount: 1, unit: 'days' } }],
    edges: [['trigger', 'wait']],
    enabled: false,
  });
  await server.sql(
    `INSERT INTO contacts (id, project_id, email, subscribed, data) SELECT 'cnt_lp_' || g, $1, 'lp' || g || '@example.com', true, '{}' FROM generate_series(1, 20000) g`,
    [p.project.id],
  );
  // 20,000 executions that EXITED, and three of each other ending, the newest of them the oldest executions.
  await server.sql(
    `INSERT INTO workflow_executions (id, project_id, workflow_id, contact_id, status, started_at, completed_at, exit_reason)
     SELECT gen_random_uuid(), $1, $2, 'cnt_lp_' || g, 'EXITED', now() - g * interval '1 second', now(), 'exit step' FROM generate_series(1, 20000) g`,
    [p.project.id, w.id],
  );
  await server.sql(
    `INSERT INTO workflow_executions (id, project_id, workflow_id, contact_id, status, started_at, completed_at)
     SELECT gen_random_uuid(), $1, $2, 'cnt_lp_' || g, s, now() - interval '30 days' - g * interval '1 second', now()
       FROM generate_series(1, 3) g, unnest(ARRAY['COMPLETED', 'FAILED', 'CANCELLED']) s`,
    [p.project.id, w.id],
  );
  await server.sql('ANALYZE workflow_executions');

  // EXITED, which nearly every execution has, may be read along the workflow's newest executions.
  for (const status of ['COMPLETED', 'FAILED', 'CANCELLED'] as const) {
    assert.deepEqual(await indexesRead(w.id, status), ['workflow_executions_workflow_ended_idx'], `the plan of a page of ${status}`);
  }
  // The active ones are read through the runner's partial indexes, not the workflow's whole history.
  for (const status of ['RUNNING', 'WAITING'] as const) {
    const read = await indexesRead(w.id, status);
    assert.ok(read.length > 0 && !read.includes('workflow_executions_workflow_started_idx'), `the plan of a page of ${status} reads ${read.join(', ')}`);
  }

  const completed = await p.sk.get(`/workflows/${w.id}/executions?status=COMPLETED&limit=2`);
  assert.equal(completed.status, 200, completed.text);
  assert.equal(completed.body.total, 3);
  assert.deepEqual(
    completed.body.data.map((e: { status: string; contact: { email: string } }) => [e.status, e.contact.email]),
    [
      ['COMPLETED', 'lp1@example.com'],
      ['COMPLETED', 'lp2@example.com'],
    ],
  );
  const rest = await p.sk.get(`/workflows/${w.id}/executions?status=COMPLETED&limit=2&cursor=${encodeURIComponent(completed.body.cursor)}`);
  deepCursorWorkflow = { id: w.id, sk: p.sk };
  assert.deepEqual(
    rest.body.data.map((e: { contact: { email: string } }) => e.contact.email),
    ['lp3@example.com'],
  );
  assert.equal(rest.body.hasMore, false);
});

test('a page after a cursor starts its index scan at the cursor, however deep (http/keyset.ts)', async () => {
  // The lists with a cursor of (time, key) share afterCursor: the emails, suppressions, uploads and
  // executions. Its condition written as an OR was a filter, so a page 18,000 executions deep read
  // the 18,000 newer ones first.
  assert.ok(deepCursorWorkflow, 'the first case built the workflow of 20,000 executions');
  const [deep] = await server.sql<{ started_at: Date; id: string }>(
    `SELECT started_at, id FROM workflow_executions WHERE workflow_id = $1 ORDER BY started_at DESC, id DESC OFFSET 18000 LIMIT 1`,
    [deepCursorWorkflow.id],
  );
  const cursor = encodeCursor(deep.started_at.toISOString(), deep.id);
  const { sql, params } = executionsPageQuery(server.ctx.database.db, deepCursorWorkflow.id, { limit: 50, cursor }).toSQL();
  const [row] = await server.sql<{ 'QUERY PLAN': [{ Plan: Record<string, unknown> }] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, params);
  const removed = (node: Record<string, unknown>): number =>
    Number(node['Rows Removed by Filter'] ?? 0) + ((node.Plans as Record<string, unknown>[] | undefined) ?? []).reduce((n, c) => n + removed(c), 0);
  assert.ok(removed(row['QUERY PLAN'][0].Plan) < 100, `rows read and dropped before the page: ${removed(row['QUERY PLAN'][0].Plan)}`);
  const page = await deepCursorWorkflow.sk.get(`/workflows/${deepCursorWorkflow.id}/executions?limit=3&cursor=${encodeURIComponent(cursor)}`);
  const expected = await server.sql<{ id: string }>(
    `SELECT id FROM workflow_executions WHERE workflow_id = $1 ORDER BY started_at DESC, id DESC OFFSET 18001 LIMIT 3`,
    [deepCursorWorkflow.id],
  );
  assert.equal(page.status, 200, page.text);
  assert.deepEqual(
    page.body.data.map((e: { id: string }) => e.id),
    expected.map((e) => e.id),
  );
});

test('the top campaigns read the newest sent campaigns of the range from their own index entries, at most 1,000', async () => {
  // Campaigns have no cap: without campaigns_project_sent_idx every sent campaign of the range was read and sorted.
  const p = await bootstrap(server.api, 'sent campaigns');
  await server.sql(
    `INSERT INTO campaigns (id, project_id, name, subject, body, from_email, status, sent_at, completed_at)
     SELECT gen_random_uuid(), $1, 'Campaign ' || g, 's', 'b', 'a@example.com', 'SENT', now() - g * interval '1 minute', now() - g * interval '1 minute'
       FROM generate_series(1, 5000) g`,
    [p.project.id],
  );
  await server.sql('ANALYZE campaigns');
  const range = { from: new Date(Date.now() - 30 * 86_400_000), to: new Date(), toDay: false };
  const { sql, params } = new PgDialect().sqlToQuery(sentCampaignsQuery(p.project.id, range));
  const [row] = await server.sql<{ 'QUERY PLAN': [{ Plan: Record<string, unknown> }] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, params);
  const scans = (node: Record<string, unknown>): { index: unknown; rows: unknown }[] => [
    ...(String(node['Node Type']).includes('Scan') ? [{ index: node['Index Name'], rows: node['Actual Rows'] }] : []),
    ...((node.Plans as Record<string, unknown>[] | undefined) ?? []).flatMap(scans),
  ];
  assert.deepEqual(scans(row['QUERY PLAN'][0].Plan), [{ index: 'campaigns_project_sent_idx', rows: 1000 }]);
  const top = await p.sk.get('/analytics/top-campaigns?limit=2&metric=sent');
  assert.equal(top.status, 200, top.text);
  assert.equal(top.body.data.length, 2);
});

test("a page of an old campaign's emails reads its window of the project's emails, not the newer or older ones", async () => {
  // Before the window (migration 0027) a first page walked every newer email of the project (0.36–0.46 s
  // with 300,000 after a campaign of 1,000,000) and counted the campaign's emails, and its last page
  // every older email.
  const p = await bootstrap(server.api, 'campaign window');
  const CAMPAIGN = 20_000;
  const [campaign] = await server.sql<{ id: string }>(
    `INSERT INTO campaigns (id, project_id, name, subject, body, from_email, status, sent_at, completed_at, total_recipients, fanout_done)
     VALUES (gen_random_uuid(), $1, 'Old news', 's', 'b', 'news@example.com', 'SENT', now() - interval '40 days', now() - interval '39 days', $2, true)
     RETURNING id`,
    [p.project.id, CAMPAIGN],
  );
  const emailsOf = (n: number, campaignId: string | null, ago: string) =>
    server.sql(
      `WITH c AS (INSERT INTO email_contents (id, project_id, body_source) VALUES (gen_random_uuid(), $1, 'b') RETURNING id)
       INSERT INTO emails (id, project_id, campaign_id, to_email, from_email, type, subject_source, content_id, status, sent_at, created_at)
       SELECT gen_random_uuid(), $1, $2::uuid, 'r' || g || '@example.com', 'news@example.com', 'MARKETING', 's', (SELECT id FROM c), 'SENT', now(),
              now() - interval '${ago}' + g * interval '1 millisecond'
         FROM generate_series(1, $3::int) g`,
      [p.project.id, campaignId, n],
    );
  await emailsOf(10_000, null, '60 days');
  await emailsOf(CAMPAIGN, campaign.id, '40 days');
  await emailsOf(20_000, null, '1 hour');
  // The window its fan-out's batches write.
  await server.sql(
    `UPDATE campaigns SET emails_from = w.f, emails_until = w.u
       FROM (SELECT min(created_at) AS f, max(created_at) AS u FROM emails WHERE campaign_id = $1) AS w WHERE id = $1`,
    [campaign.id],
  );
  await server.sql('VACUUM ANALYZE emails');

  /** Rows the page's own statement read: those its scans returned and those they dropped. */
  const rowsRead = async (cursor?: string) => {
    const { page } = await emailsPageQuery(server.ctx.database.db, p.project.id, { limit: 50, campaignId: campaign.id, cursor });
    const { sql, params } = page(server.ctx.database.db).toSQL();
    const [row] = await server.sql<{ 'QUERY PLAN': [{ Plan: Record<string, unknown> }] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, params);
    const read = (node: Record<string, unknown>): number =>
      (String(node['Node Type']).includes('Scan') ? Number(node['Actual Rows']) + Number(node['Rows Removed by Filter'] ?? 0) : 0) +
      ((node.Plans as Record<string, unknown>[] | undefined) ?? []).reduce((n, c) => n + read(c), 0);
    return read(row['QUERY PLAN'][0].Plan);
  };
  const first = await rowsRead();
  assert.ok(first <= 51, `a first page read ${first} rows`);
  const [thirtiethOldest] = await server.sql<{ created_at: Date; id: string }>(
    'SELECT created_at, id FROM emails WHERE campaign_id = $1 ORDER BY created_at, id OFFSET 30 LIMIT 1',
    [campaign.id],
  );
  const last = encodeCursor(thirtiethOldest.created_at.toISOString(), thirtiethOldest.id);
  const lastRead = await rowsRead(last);
  assert.ok(lastRead <= 31, `a last page read ${lastRead} rows`);

  // Through the API: the total is the sent campaign's own count, and the pages are the campaign's.
  const firstPage = await p.sk.get(`/emails?campaignId=${campaign.id}&limit=50`);
  assert.equal(firstPage.status, 200, firstPage.text);
  const newest = await server.sql<{ id: string }>('SELECT id FROM emails WHERE campaign_id = $1 ORDER BY created_at DESC, id DESC LIMIT 50', [campaign.id]);
  assert.deepEqual([firstPage.body.total, firstPage.body.data.map((e: { id: string }) => e.id)], [CAMPAIGN, newest.map((e) => e.id)]);
  const lastPage = await p.sk.get(`/emails?campaignId=${campaign.id}&limit=50&cursor=${encodeURIComponent(last)}`);
  assert.deepEqual([lastPage.body.data.length, lastPage.body.hasMore], [30, false]);
  assert.ok(lastPage.body.data.every((e: { campaignId: string }) => e.campaignId === campaign.id));

  // A page of one status counts that status's emails of the campaign from its index entries alone
  // (emails_campaign_idx), not visiting each row for its project: 129–231 ms for 90,000–900,000.
  const { campaign: ofStatus } = await emailsPageQuery(server.ctx.database.db, p.project.id, { limit: 50, campaignId: campaign.id, status: 'SENT' });
  assert.ok(ofStatus);
  const counted = new PgDialect().sqlToQuery(sql`SELECT count(*) FROM emails WHERE ${ofStatus.counted}`);
  const [countPlan] = await server.sql<{ 'QUERY PLAN': [{ Plan: Record<string, unknown> }] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${counted.sql}`, counted.params);
  const scan = (node: Record<string, unknown>): Record<string, unknown> =>
    String(node['Node Type']).includes('Scan') ? node : scan((node.Plans as Record<string, unknown>[])[0]);
  const counting = scan(countPlan['QUERY PLAN'][0].Plan);
  assert.deepEqual(
    [counting['Node Type'], counting['Index Name'], counting['Heap Fetches'], counting['Actual Rows']],
    ['Index Only Scan', 'emails_campaign_idx', 0, CAMPAIGN],
  );
  const sentPage = await p.sk.get(`/emails?campaignId=${campaign.id}&status=SENT&limit=50`);
  assert.deepEqual([sentPage.body.total, sentPage.body.data.length], [CAMPAIGN, 50]);
  const none = await p.sk.get(`/emails?campaignId=${campaign.id}&status=BOUNCED&limit=50`);
  assert.deepEqual([none.body.total, none.body.data.length], [0, 0]);
});
