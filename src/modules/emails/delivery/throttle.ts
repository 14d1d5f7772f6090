import type { AppContext } from '../../../context.ts';

/**
 * Reserves the project's next `count` send slots, one UPDATE for the batch. The slot lives in one
 * PostgreSQL row per project, so every worker process shares the SEND_RATE_PER_SECOND budget.
 */
export async function reserveSendSlots(ctx: AppContext, projectId: string, count: number): Promise<Date[]> {
  const spacingMs = 1000 / ctx.config.sendRatePerSecond;
  const { rows } = await ctx.database.pool.query<{ first: Date }>(
    `INSERT INTO send_throttle (project_id, next_slot)
          VALUES ($1, clock_timestamp() + make_interval(secs => $2::float8 * $3::int / 1000.0))
     ON CONFLICT (project_id) DO UPDATE
          SET next_slot = greatest(send_throttle.next_slot, clock_timestamp()) + make_interval(secs => $2::float8 * $3::int / 1000.0)
     RETURNING next_slot - make_interval(secs => $2::float8 * $3::int / 1000.0) AS first`,
    [projectId, spacingMs, count],
  );
  const first = rows[0].first.getTime();
  return Array.from({ length: count }, (_, i) => new Date(first + i * spacingMs));
}
