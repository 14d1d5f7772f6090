import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { uuidv7 } from '../src/db/ids.ts';
import { bootstrap } from '../test/helpers/bootstrap.ts';
import { startTestDns } from '../test/helpers/dns-server.ts';
import { verifyDomain } from '../test/helpers/domains.ts';
import { startTestServer } from '../test/helpers/server.ts';
import { buildWorkflow, testClock } from '../test/helpers/workflows.ts';
import { fmt, printMachine, verdict, withBenchDatabase } from './lib.ts';

/**
 * Workflow engine benchmark: N contacts (default 10,000) enrolled by tracked events into
 * event → UPDATE_CONTACT → DELAY (1 minute) → CONDITION → SEND_EMAIL (capture mode).
 *
 * 1. Enrolment: N `POST /v1/track` (50 concurrent); the runner walks each execution to its DELAY.
 * 2. Timers: the clock jumps one minute, so N timers fall due at once; the runner completes the
 *    DELAYs and walks CONDITION → SEND_EMAIL. Step transitions/s = step rows written or completed
 *    in this phase / its duration (target ≥ 5,000/s). Timer lateness: the time from the jump until
 *    p50 / p99 of the DELAY rows are COMPLETED, sampled every 10 ms (target p99 < 1 s).
 * 3. Reference: the same claims and step-row writes issued directly in SQL (claim 500 FOR UPDATE
 *    SKIP LOCKED, insert the step rows, update the executions, per transaction), in the same run.
 *    Target: the engine ≥ 50 % of it.
 *
 * The server (API and worker) runs in this process so the bench can move its clock; the peak RSS
 * (VmHWM) reported is this whole process.
 *
 *   npm run bench -- workflows [--contacts=N]
 */

const DOMAIN = 'flow.bench.test';

const arg = (args: string[], name: string, fallback: number) => {
  const found = args.find((a) => a.startsWith(`--${name}=`));
  return found ? Number(found.slice(name.length + 3)) : fallback;
};

const vmHwmMiB = () => {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) / 1024 : process.memoryUsage().rss / 2 ** 20;
};

export async function run(args: string[]): Promise<void> {
  const contacts = arg(args, 'contacts', 10_000);
  printMachine('Herald workflow engine benchmark');
  const dns = await startTestDns();
  try {
    await withBenchDatabase(async (databaseUrl) => {
      const clock = testClock();
      let stopped = false;
      const server = await startTestServer(
        { DNS_SERVERS: dns.address, API_RATE_LIMIT_PER_MINUTE: '10000000', SEND_RATE_PER_SECOND: '100000' },
        { clock, databaseUrl },
      );
      try {
        const b = await bootstrap(server.api, 'bench-workflows');
        await verifyDomain(b.sk, dns, DOMAIN);
        const tpl = await b.sk.post('/templates', {
          name: 'Hi',
          subject: 'Hi {{email}}',
          body: '<p>Plan {{plan}}</p>',
          from: `hi@${DOMAIN}`,
          type: 'MARKETING',
        });
        if (tpl.status !== 201) throw new Error(tpl.text);
        const wf = await buildWorkflow(b.sk, {
          eventName: 'bench_signup',
          steps: [
            { key: 'mark', type: 'UPDATE_CONTACT', config: { data: { onboarding: 'started' } } },
            { key: 'wait', type: 'DELAY', config: { amount: 1, unit: 'minutes' } },
            { key: 'check', type: 'CONDITION', config: { field: 'data.plan', operator: 'equals', value: 'pro' } },
            { key: 'mail', type: 'SEND_EMAIL', config: { templateId: tpl.body.id } },
            { key: 'mail2', type: 'SEND_EMAIL', config: { templateId: tpl.body.id } },
          ],
          // Both branches send, so every contact gets one email.
          edges: [
            ['trigger', 'mark'],
            ['mark', 'wait'],
            ['wait', 'check'],
            ['check', 'mail', 'yes'],
            ['check', 'mail2', 'no'],
          ],
        });

        const count = async (sql: string) => (await server.sql<{ n: number }>(sql, [wf.id]))[0].n;

        console.log(`\n1. enrolment: ${fmt(contacts)} tracked events (50 concurrent)`);
        const t0 = performance.now();
        let next = 0;
        await Promise.all(
          Array.from({ length: 50 }, async () => {
            while (next < contacts) {
              const i = next++;
              const res = await b.pk.post('/v1/track', { email: `u${i}@bench.test`, event: 'bench_signup', data: { plan: i % 3 === 0 ? 'pro' : 'free' } });
              if (res.status !== 200) throw new Error(res.text);
            }
          }),
        );
        const tracked = performance.now();
        while ((await count("SELECT count(*)::int AS n FROM workflow_executions WHERE workflow_id = $1 AND status = 'WAITING'")) < contacts) {
          await new Promise((r) => setTimeout(r, 50));
        }
        const enrolSeconds = (performance.now() - t0) / 1000;
        console.log(`   tracked in ${((tracked - t0) / 1000).toFixed(1)} s; all ${fmt(contacts)} at their DELAY after ${enrolSeconds.toFixed(1)} s`);
        console.log(
          `   ${fmt((3 * contacts) / enrolSeconds)} step transitions/s while enrolling (TRIGGER, UPDATE_CONTACT, DELAY start; bound by the HTTP track rate)`,
        );

        console.log(`\n2. timers: the clock jumps 1 minute; ${fmt(contacts)} DELAYs fall due at once`);
        const delayDone = `SELECT count(*)::int AS n FROM workflow_step_executions WHERE workflow_id = $1 AND step_id = '${wf.steps.wait}' AND status = 'COMPLETED'`;
        const jump = performance.now();
        clock.advance(61_000);
        const jumpedTo = clock.now();
        const marks: { at: number; n: number }[] = [];
        for (;;) {
          const n = await count(delayDone);
          marks.push({ at: performance.now() - jump, n });
          if (n >= contacts) break;
          await new Promise((r) => setTimeout(r, 10));
        }
        const when = (share: number) => marks.find((m) => m.n >= Math.ceil(contacts * share))!.at;
        while ((await count("SELECT count(*)::int AS n FROM workflow_executions WHERE workflow_id = $1 AND status = 'COMPLETED'")) < contacts) {
          await new Promise((r) => setTimeout(r, 10));
        }
        const phaseSeconds = (performance.now() - jump) / 1000;
        const transitions = 3 * contacts;
        const engineRate = transitions / phaseSeconds;
        const emails = await count('SELECT count(*)::int AS n FROM emails WHERE workflow_id = $1');
        if (emails !== contacts) throw new Error(`${emails} emails for ${contacts} executions`);
        // What a recipient sees: each email's hand-off to the relay (captured; `sent_at` is the engine
        // clock's, which runs on from the jump), read afterwards so the phase pays no extra sampling.
        while ((await count('SELECT count(*)::int AS n FROM emails WHERE workflow_id = $1 AND sent_at IS NULL')) > 0) {
          await new Promise((r) => setTimeout(r, 50));
        }
        const [sent] = await server.sql<{ p50: number; p99: number; last: number }>(
          `SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY ms) AS p50, percentile_disc(0.99) WITHIN GROUP (ORDER BY ms) AS p99, max(ms) AS last
             FROM (SELECT extract(epoch FROM sent_at - $2::timestamptz) * 1000 AS ms FROM emails WHERE workflow_id = $1) AS s`,
          [wf.id, jumpedTo.toISOString()],
        );
        const peak = vmHwmMiB();

        console.log(
          `   timer lateness: p50 ${fmt(when(0.5))} ms, p99 ${fmt(when(0.99))} ms, last ${fmt(when(1))} ms (target p99 < 1 s: ${verdict(when(0.99) < 1000)})`,
        );
        console.log(
          `   ${fmt(transitions)} step transitions (DELAY end, CONDITION, SEND_EMAIL + ${fmt(contacts)} emails queued) in ${phaseSeconds.toFixed(2)} s`,
        );
        console.log(
          `   emails sent (captured), from the jump: p50 ${fmt(Number(sent.p50))} ms, p99 ${fmt(Number(sent.p99))} ms, last ${fmt(Number(sent.last))} ms (${fmt(contacts / (Number(sent.last) / 1000))} emails/s)`,
        );

        await server.stop();
        stopped = true;
        console.log('\n3. reference: the same claims and step-row writes in plain SQL (server stopped)');
        const refRate = await sqlReference(databaseUrl, b.project.id, wf.id, wf.steps.wait, contacts);
        console.log(`\n   engine:          ${fmt(engineRate)} step transitions/s (target ≥ 5,000/s: ${verdict(engineRate >= 5000)})`);
        console.log(`   SQL reference:   ${fmt(refRate)} step transitions/s`);
        console.log(`   ratio:           ${((engineRate / refRate) * 100).toFixed(1)} % (target ≥ 50 %: ${verdict(engineRate / refRate >= 0.5)})`);
        console.log(`   peak RSS:        ${fmt(peak)} MiB (VmHWM of the process running API, worker and bench)`);
      } finally {
        if (!stopped) await server.stop();
      }
    });
  } finally {
    await dns.stop();
  }
}

/**
 * N executions of the bench workflow, inserted due; then, per transaction, claim 500 FOR UPDATE
 * SKIP LOCKED, insert three step rows each and complete them: the engine's writes without its logic.
 */
async function sqlReference(databaseUrl: string, projectId: string, workflowId: string, stepId: string, n: number): Promise<number> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  pool.on('error', () => {}); // the database stops at the end of the run
  try {
    const now = new Date().toISOString();
    await pool.query(
      `INSERT INTO workflow_executions (id, project_id, workflow_id, contact_id, status, current_step_id, context, depth, due_at, started_at, updated_at)
       SELECT gen_random_uuid(), $1, $2, c.id, 'RUNNING', $3, '{}'::jsonb, 0, $4::timestamptz, $4::timestamptz, $4::timestamptz
         FROM contacts c WHERE c.project_id = $1`,
      [projectId, workflowId, stepId, now],
    );
    const start = performance.now();
    let done = 0;
    for (;;) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const { rows } = await client.query<{ id: string }>(
          `SELECT id FROM workflow_executions WHERE status IN ('RUNNING', 'WAITING') AND due_at <= $1::timestamptz AND workflow_id = $2
            ORDER BY due_at LIMIT 500 FOR UPDATE SKIP LOCKED`,
          [new Date(Date.now() + 3_600_000).toISOString(), workflowId],
        );
        if (rows.length === 0) {
          await client.query('COMMIT');
          break;
        }
        const at = new Date().toISOString();
        const steps = rows.flatMap((r) =>
          [0, 1, 2].map(() => ({
            id: uuidv7(),
            execution_id: r.id,
            workflow_id: workflowId,
            step_id: stepId,
            project_id: projectId,
            status: 'COMPLETED',
            attempt: 1,
            output: { branch: 'yes' },
            error: null,
            started_at: at,
            completed_at: at,
          })),
        );
        await client.query(
          `INSERT INTO workflow_step_executions (id, execution_id, workflow_id, step_id, project_id, status, attempt, output, error, started_at, completed_at)
           SELECT r.id, r.execution_id, r.workflow_id, r.step_id, r.project_id, r.status, r.attempt, r.output, r.error, r.started_at, r.completed_at
             FROM jsonb_to_recordset($1::jsonb) AS r(id uuid, execution_id uuid, workflow_id uuid, step_id uuid, project_id text, status text,
                  attempt int, output jsonb, error text, started_at timestamptz, completed_at timestamptz)`,
          [JSON.stringify(steps)],
        );
        const execs = rows.map((r) => ({
          id: r.id,
          status: 'COMPLETED',
          current_step_id: stepId,
          context: {},
          due_at: null,
          waiting_event: null,
          exit_reason: null,
          error: null,
          completed_at: at,
        }));
        await client.query(
          `UPDATE workflow_executions x
              SET status = r.status, current_step_id = r.current_step_id, context = r.context, due_at = r.due_at,
                  waiting_event = r.waiting_event, exit_reason = r.exit_reason, error = r.error, completed_at = r.completed_at,
                  lease_until = NULL, updated_at = $2::timestamptz
             FROM jsonb_to_recordset($1::jsonb) AS r(id uuid, status text, current_step_id uuid, context jsonb, due_at timestamptz,
                  waiting_event text, exit_reason text, error text, completed_at timestamptz)
            WHERE x.id = r.id`,
          [JSON.stringify(execs), at],
        );
        await client.query('COMMIT');
        done += rows.length;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      } finally {
        client.release();
      }
    }
    const seconds = (performance.now() - start) / 1000;
    console.log(`   ${fmt(3 * done)} step rows for ${fmt(done)} executions in ${seconds.toFixed(2)} s`);
    return (3 * done) / seconds;
  } finally {
    await pool.end();
  }
}
