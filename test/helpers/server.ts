import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import type { AppContext, Clock } from '../../src/context.ts';
import { startRuntime } from '../../src/runtime.ts';
import { type Api, createApi } from './http.ts';

export type TestServer = {
  url: string;
  api: Api;
  ctx: AppContext;
  /** The Fastify instance (its `registeredRoutes` feed the OpenAPI contract test). */
  app: FastifyInstance;
  databaseUrl: string;
  /** Runs SQL directly, for assertions on what was stored. */
  sql: <T extends pg.QueryResultRow = Record<string, unknown>>(text: string, values?: unknown[]) => Promise<T[]>;
  stop: () => Promise<void>;
};

/** A fresh database in the run's PostgreSQL server. */
export async function createTestDatabase(): Promise<string> {
  const admin = process.env.HERALD_TEST_PG_URL;
  if (!admin) throw new Error('HERALD_TEST_PG_URL is not set: run tests with `npm test`');
  const name = `t_${randomBytes(6).toString('hex')}`;
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  await client.query(`CREATE DATABASE ${name}`);
  await client.end();
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Starts Herald (API and workers) on a loopback port against its own database. */
export async function startTestServer(env: Record<string, string> = {}, opts: { clock?: Clock; databaseUrl?: string } = {}): Promise<TestServer> {
  const databaseUrl = opts.databaseUrl ?? (await createTestDatabase());
  const dataDir = await mkdtemp(path.join(tmpdir(), 'herald-test-data-'));
  const config = loadConfig({
    DATABASE_URL: databaseUrl,
    DATA_DIR: dataDir,
    JWT_SECRET: 'test-secret-0123456789abcdef',
    LOG_LEVEL: 'silent',
    PORT: '0',
    SIGNUPS_PER_IP_PER_HOUR: '1000', // every test signs up from 127.0.0.1; test/auth.throttle.test.ts sets its own
    STRICT_RESPONSES: 'true', // a body its route's schema rejects is a 500 (src/http/openapi.ts)
    ...env,
  });
  const runtime = await startRuntime(config, { log: pino({ level: process.env.HERALD_TEST_LOG ?? 'silent' }), clock: opts.clock });
  if (!runtime.app) throw new Error('test server needs PROCESS_ROLE api or all');
  await runtime.app.listen({ port: 0, host: '127.0.0.1' });
  const address = runtime.app.server.address();
  if (!address || typeof address !== 'object') throw new Error('no address');
  const url = `http://127.0.0.1:${address.port}`;
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 3 });
  return {
    url,
    api: createApi(url),
    ctx: runtime.ctx,
    app: runtime.app,
    databaseUrl,
    sql: async (text, values) => (await pool.query(text, values)).rows,
    stop: async () => {
      await runtime.stop();
      try {
        await assertCountersExact(pool);
      } finally {
        await pool.end();
      }
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

const NO_STEP = `'00000000-0000-0000-0000-000000000000'::uuid`;

/** Each counter table that triggers keep (migrations 0009, 0012, 0018, 0019, 0021), with the key it counts and the rows it counts. */
const COUNTERS = [
  { counters: 'contact_counts', key: ['project_id', 'subscribed'], rows: 'SELECT project_id, subscribed FROM contacts' },
  { counters: 'event_counts', key: ['project_id', 'name'], rows: 'SELECT project_id, name FROM events' },
  {
    counters: 'event_day_counts',
    key: ['project_id', 'name', 'day'],
    rows: `SELECT project_id, name, (created_at AT TIME ZONE 'UTC')::date AS day FROM events`,
  },
  { counters: 'email_counts', key: ['project_id', 'status'], rows: 'SELECT project_id, status FROM emails' },
  {
    counters: 'workflow_execution_counts',
    key: ['workflow_id', 'status', 'step_id'],
    rows: `SELECT workflow_id, status, CASE WHEN status = 'WAITING' THEN coalesce(current_step_id, ${NO_STEP}) ELSE ${NO_STEP} END AS step_id FROM workflow_executions`,
  },
  { counters: 'workflow_step_counts', key: ['workflow_id', 'step_id', 'status'], rows: 'SELECT workflow_id, step_id, status FROM workflow_step_executions' },
];

/**
 * After every test server: the totals of GET /contacts, /events, /activity, /emails, GET /workflows/:id and
 * its executions come from counters that triggers keep, so whatever a test did, through whichever path, each counter
 * must equal the rows stored. A database a test took away is not checked.
 */
async function assertCountersExact(pool: pg.Pool): Promise<void> {
  for (const { counters, key, rows } of COUNTERS) {
    const k = key.join(', ');
    let differ: Record<string, unknown>[];
    try {
      ({ rows: differ } = await pool.query(`
        SELECT ${key.map((c) => `coalesce(c.${c}, r.${c}) AS ${c}`).join(', ')}, coalesce(c.n, 0)::int AS counted, coalesce(r.n, 0)::int AS stored
          FROM (SELECT ${k}, sum(count) AS n FROM ${counters} GROUP BY ${k}) AS c
          FULL JOIN (SELECT ${k}, count(*) AS n FROM (${rows}) AS s GROUP BY ${k}) AS r USING (${k})
         WHERE coalesce(c.n, 0) <> coalesce(r.n, 0)`));
    } catch (err) {
      if ((err as { code?: string }).code?.startsWith('42')) throw err; // a mistake in the query, not a database gone
      return;
    }
    if (differ.length > 0) throw new Error(`${counters} differ from the rows stored: ${JSON.stringify(differ)}`);
  }
}
