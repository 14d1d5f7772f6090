import { sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { lockKey } from '../../db/key-lock.ts';
import { limitReached } from '../../http/errors.ts';

/**
 * How many segments a project may have, and how many bytes their conditions may hold in all.
 * `GET /segments` answers them all in one list (the spec: unpaginated), so its cost grows with
 * both: uncapped, a project of 100,000 small segments made each list a 39 MB answer of about 3 s,
 * and 1,000 conditions of 1 MB (the body limit) would have made it 1 GB.
 */
export const MAX_SEGMENTS_PER_PROJECT = 1_000;
export const MAX_SEGMENT_CONDITION_BYTES_PER_PROJECT = 8 * 1024 * 1024;

/** Takes the project's segment-count lock until the transaction ends, so concurrent creates stop exactly at the caps. */
export const lockProjectSegments = (tx: Db, projectId: string): Promise<void> => lockKey(tx, `segments:${projectId}`);

const inMb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

/**
 * 403 (with `details.limit`) when the project cannot take one more segment (`adding`), or when
 * `condition` would take its conditions past their bytes: in place of segment `replacing`'s, for a
 * PATCH. A condition's bytes are counted as `segments.condition_bytes` is, as PostgreSQL prints it.
 */
export async function assertRoomForSegment(db: Db, projectId: string, change: { adding: boolean; condition: unknown; replacing?: string }): Promise<void> {
  const json = change.condition === null || change.condition === undefined ? null : JSON.stringify(change.condition);
  const { rows } = await db.execute<{ n: number; bytes: string }>(sql`
    SELECT count(*)::int AS n,
           (coalesce(sum(condition_bytes), 0) + coalesce(octet_length(${json}::jsonb::text), 0))::bigint AS bytes
      FROM segments
     WHERE project_id = ${projectId} AND id IS DISTINCT FROM ${change.replacing ?? null}::uuid`);
  const { n } = rows[0];
  const bytes = Number(rows[0].bytes);
  if (change.adding && n >= MAX_SEGMENTS_PER_PROJECT) {
    throw limitReached(`A project can have at most ${MAX_SEGMENTS_PER_PROJECT.toLocaleString('en-US')} segments; delete one first`, MAX_SEGMENTS_PER_PROJECT);
  }
  if (json !== null && bytes > MAX_SEGMENT_CONDITION_BYTES_PER_PROJECT) {
    throw limitReached(
      `A project's segment conditions can hold at most ${inMb(MAX_SEGMENT_CONDITION_BYTES_PER_PROJECT)} in all, and this one would take them to ${inMb(bytes)}; ` +
        'use shorter conditions (a STATIC segment for a long list of addresses), or delete segments first',
      MAX_SEGMENT_CONDITION_BYTES_PER_PROJECT,
    );
  }
}
