import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type SQL, and, eq } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import type { Db } from '../src/db/client.ts';
import { emails } from '../src/db/schema/emails.ts';
import { rebuildOutcomeRollups } from '../src/modules/analytics/outcome-rollups.ts';
import { countsFor } from '../src/modules/reputation/rates.ts';
import { recordBounce } from '../src/modules/suppressions/feedback.ts';
import { bootstrap } from './helpers/bootstrap.ts';
import { type TestServer, startTestServer } from './helpers/server.ts';

// Reputation checks must not cost what the project has sent: emails are never deleted, and the
// rates were counted over every email of the project (~0.6 s at 1,000,000) on every page view
// and after every hard bounce and complaint.

const dialect = new PgDialect();
let server: TestServer;

before(async () => {
  server = await startTestServer();
});
after(async () => {
  await server?.stop();
});

/** `count` SENT emails of the project (created and sent now, each with a Message-ID), counted into its outcome summary. */
async function sentEmails(projectId: string, count: number) {
  await server.sql(
    `WITH c AS (INSERT INTO email_contents (id, project_id, body_source) VALUES (gen_random_uuid(), $1, 'b') RETURNING id)
     INSERT INTO emails (id, project_id, to_email, from_email, type, subject_source, content_id, status, message_id, sent_at)
     SELECT gen_random_uuid(), $1, 'r' || g || '@example.net', 'news@example.net', 'MARKETING', 's', (SELECT id FROM c), 'SENT',
            '<' || g || '.' || $1 || '@example.net>', now()
       FROM generate_series(1, $2) AS g`,
    [projectId, count],
  );
  await rebuildOutcomeRollups(server.ctx.database.db, projectId);
}

/** Every relation an EXPLAIN (FORMAT JSON) plan reads. */
function relationsOf(node: Record<string, unknown>): string[] {
  const own = typeof node['Relation Name'] === 'string' ? [node['Relation Name']] : [];
  const children = (node.Plans as Record<string, unknown>[] | undefined) ?? [];
  return [...own, ...children.flatMap(relationsOf)];
}

/** Counts the rate-counting statements (they name the column "sentAllTime") the server runs from now on. */
function countRateQueries(): { readonly count: number; stop: () => void } {
  const db = server.ctx.database.db;
  const original = db.execute;
  const counter = { count: 0, stop: () => void (db.execute = original) };
  db.execute = ((query: SQL) => {
    if (dialect.sqlToQuery(query).sql.includes('"sentAllTime"')) counter.count++;
    return original.call(db, query);
  }) as typeof db.execute;
  return counter;
}

describe('reputation checks at scale', () => {
  test('the rates are counted without reading the project’s emails', async () => {
    const p = await bootstrap(server.api, 'planned');
    let statement: SQL | undefined;
    const recorder = {
      execute: async (query: SQL) => {
        statement = query;
        return { rows: [{}] };
      },
    } as unknown as Db;
    await countsFor(recorder, p.project.id, new Date());
    assert.ok(statement, 'countsFor ran a statement');
    const { sql: text, params } = dialect.sqlToQuery(statement);
    const [row] = await server.sql<{ 'QUERY PLAN': [{ Plan: Record<string, unknown> }] }>(`EXPLAIN (FORMAT JSON) ${text}`, params);
    assert.deepEqual([...new Set(relationsOf(row['QUERY PLAN'][0].Plan))], ['email_outcome_slots']);
  });

  test('a storm of 200 hard bounces in one project is checked about once a second, and the last bounce still counts', async () => {
    const storm = await bootstrap(server.api, 'storm');
    const quiet = await bootstrap(server.api, 'quiet');
    // 200 bounces of 2,500 sent is 8 %: the all-time critical level is reached by the 200th bounce only.
    await sentEmails(storm.project.id, 2500);
    await sentEmails(quiet.project.id, 100);
    const db = server.ctx.database.db;
    const bouncing = await db.select().from(emails).where(eq(emails.projectId, storm.project.id)).limit(200);
    await server.sql(`UPDATE emails SET status = 'BOUNCED', bounced_at = now() WHERE id IN (SELECT id FROM emails WHERE project_id = $1 ORDER BY id LIMIT 9)`, [
      quiet.project.id,
    ]);
    await rebuildOutcomeRollups(db, quiet.project.id);
    const [quietEmail] = await db
      .select()
      .from(emails)
      .where(and(eq(emails.projectId, quiet.project.id), eq(emails.status, 'SENT')))
      .limit(1);

    const rateQueries = countRateQueries();
    const started = performance.now();
    let quietDisabledAtOnce: boolean | undefined;
    try {
      for (let i = 0; i < bouncing.length; i += 10) {
        await Promise.all(bouncing.slice(i, i + 10).map((e) => recordBounce(server.ctx, e, { type: 'Permanent', diagnostic: '550 5.1.1 unknown user' })));
        if (i === 100) {
          // Another project's bounce in the middle of the storm is checked at once (10 of 100 = 10 %: critical).
          await recordBounce(server.ctx, quietEmail, { type: 'Permanent', diagnostic: '550 5.1.1 unknown user' });
          const [row] = await server.sql<{ disabled: boolean }>('SELECT disabled FROM projects WHERE id = $1', [quiet.project.id]);
          quietDisabledAtOnce = row.disabled;
        }
      }
      const stormSeconds = (performance.now() - started) / 1000;
      assert.equal(quietDisabledAtOnce, true);

      // The check due after the last bounces runs within a second and disables the project.
      const deadline = Date.now() + 5000;
      const disabled = async () => (await server.sql<{ disabled: boolean }>('SELECT disabled FROM projects WHERE id = $1', [storm.project.id]))[0].disabled;
      while (!(await disabled()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      const checks = rateQueries.count;
      rateQueries.stop();

      const report = await server.api.get(`/projects/${storm.project.id}/security`, { cookie: storm.cookie });
      assert.equal(report.body.disabled, true, 'the bounces after the last immediate check were counted');
      assert.equal(report.body.disabledReason, 'EMAIL_REPUTATION');
      assert.equal(report.body.recentSuspensions.length, 1);
      assert.deepEqual(report.body.recentSuspensions[0].bounceRate, { last7Days: 8, allTime: 8 });
      assert.equal(report.body.recentSuspensions[0].sentAllTime, 2500);

      // The quiet project's one check, then the storm's: the first at once, at most one a second after it, and one after the last bounce.
      const bound = 1 + 1 + Math.ceil(stormSeconds) + 1;
      assert.ok(checks >= 3, `${checks} checks`);
      assert.ok(checks <= bound, `${checks} rate checks for 200 bounces in ${stormSeconds.toFixed(1)} s (at most ${bound})`);
    } finally {
      rateQueries.stop();
    }
  });
});
