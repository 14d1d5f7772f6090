import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { fmt } from './lib.ts';
import { DEFAULT_WARMUP_SECONDS, type PacedLoad, type PacedResult, pacedLoad } from './paced-load.ts';
import { watchStalls } from './stalls.ts';

type Sql = <T extends Record<string, unknown>>(text: string, values?: unknown[]) => Promise<T[]>;

/**
 * The half-rate latency phase of `bench track` and `bench send`: `pacedLoad`, then the WAL that
 * PostgreSQL wrote a request, and with BENCH_STALLS=1 what the machine did during each stall
 * (stalls.ts).
 *
 * BENCH_CHECKPOINT=1 runs a CHECKPOINT first. The phase follows a full-rate phase on a freshly
 * created cluster, so PostgreSQL creates a new 16 MB WAL segment every few seconds of it (written
 * and fsynced while commits wait; a server past its first checkpoint reuses old ones), and the
 * kernel writes back the pages the full-rate phase dirtied 30 s before in one burst. The
 * CHECKPOINT removes both, and makes the phase pay full-page images instead, as a server in its
 * steady state does: a way to tell those stalls from Herald's own (bench/README.md § track).
 */
export async function halfRateLatency(load: PacedLoad, db: { sql: Sql; databaseUrl: string; heraldPool: pg.Pool }): Promise<PacedResult> {
  if (process.env.BENCH_CHECKPOINT === '1') {
    const started = performance.now();
    await db.sql('CHECKPOINT');
    console.log(`   CHECKPOINT first (BENCH_CHECKPOINT=1, ${fmt(performance.now() - started)} ms)`);
  }
  const [{ lsn }] = await db.sql<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
  const stalls = watchStalls(db.databaseUrl, db.heraldPool);
  const result = await pacedLoad(load);
  const [{ bytes }] = await db.sql<{ bytes: number }>('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1)::bigint AS bytes', [lsn]);
  const requests = Math.round(load.rate * (load.seconds + (load.warmupSeconds ?? DEFAULT_WARMUP_SECONDS)));
  console.log(`   WAL written: ${fmt(bytes / requests)} bytes a request`);
  await stalls?.report(result.slow, result.countedFrom);
  return result;
}
