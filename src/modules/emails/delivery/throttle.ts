import { sql } from 'drizzle-orm';
import type { AppContext } from '../../../context.ts';

/**
 * Reserves the project's next `count` send slots, one UPDATE for the batch. The slot lives in one
 * PostgreSQL row per project, so every worker process shares the SEND_RATE_PER_SECOND budget.
 * `minSpacingMs`: slots at least this far apart (a project whose messages are slow to compose).
 */
export async function reserveSendSlots(ctx: AppContext, projectId: string, count: number, minSpacingMs = 0): Promise<Date[]> {
  const spacingMs = Math.max(1000 / ctx.config.sendRatePerSecond, minSpacingMs);
  const span = sql`make_interval(secs => ${spacingMs}::float8 * ${count}::int / 1000.0)`;
  // As epoch milliseconds: Drizzle's raw `execute` returns timestamps as text, not Date.
  const { rows } = await ctx.database.db.execute<{ first: number }>(sql`
    INSERT INTO send_throttle (project_id, next_slot) VALUES (${projectId}, clock_timestamp() + ${span})
    ON CONFLICT (project_id) DO UPDATE SET next_slot = greatest(send_throttle.next_slot, clock_timestamp()) + ${span}
    RETURNING (extract(epoch FROM next_slot - ${span}) * 1000)::float8 AS first`);
  const first = rows[0].first;
  return Array.from({ length: count }, (_, i) => new Date(first + i * spacingMs));
}
