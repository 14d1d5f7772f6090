import type { AppContext } from '../../context.ts';
import { inOneStatement } from '../../db/client.ts';
import { prefixedId } from '../../db/ids.ts';
import { eventRollupCtes } from '../analytics/rollups.ts';
import { checkFieldCapacity } from '../contacts/field-cap.ts';
import { CONTACTS_UPSERT_CTES, type UpsertedRow, contactsUpsertValues, upsertedResult } from '../contacts/upsert-many.ts';
import { workflowEnrolCtes } from '../workflows/engine/enrol.ts';
import type { PreparedTrack, TrackResult } from './service.ts';

/**
 * Tracks of one project (distinct contacts) as ONE statement, committed on its own: no BEGIN and
 * no COMMIT, one round trip instead of four. The statement upserts the contacts (the grouped
 * upsert's CTEs), records each changed subscription and each tracked event, adds them to the
 * analytics rollups and hands them to the workflow engine (the CTEs RECORD_EVENTS_SQL holds) —
 * everything trackMany's transaction does, except what afterTrack.eventTracked adds after it, so
 * the caller uses it only when that adds nothing (service.ts).
 *
 * A track whose contact another transaction created meanwhile (upsertContacts' rare case) is left
 * out of the statement with nothing written for it: its result is null, and the caller runs it
 * again. When nothing was written because the field cap held the statement back, the 422 is thrown.
 * A connection lost before the answer may have committed: CommitOutcomeUnknown, as for a COMMIT.
 */
export async function trackInOneStatement(ctx: AppContext, projectId: string, tracks: PreparedTrack[]): Promise<(TrackResult | null)[]> {
  const upsert = contactsUpsertValues(
    projectId,
    tracks.map((k) => ({ ...k.upsert, now: k.now })),
    { defaultSubscribed: true },
  );
  // Ids made here, a subscription change's before its track's, so the timeline sorts them in that order.
  const events = tracks.map((k, ord) => ({
    ord,
    subscription_id: prefixedId('evt'),
    id: prefixedId('evt'),
    name: k.name,
    data: k.data,
    created_at: k.now.toISOString(),
  }));
  const statement = upsert.withFields ? TRACK_STATEMENT.withFields : TRACK_STATEMENT.plain;
  const { rows: written } = await inOneStatement(ctx.database, (client) =>
    client.query<UpsertedRow>({ ...statement, values: [...upsert.values, JSON.stringify(events)] }),
  );
  if (written.length === 0 && upsert.fieldKeys.length > 0) await checkFieldCapacity(ctx.database.db, projectId, upsert.fieldKeys);
  const results: (TrackResult | null)[] = tracks.map(() => null);
  for (const row of written) {
    const { result } = upsertedResult(row, upsert.prepared[row.ord]);
    results[row.ord] = { contact: result.contact, isNewContact: result.isNew, event: { id: events[row.ord].id, createdAt: tracks[row.ord].now } };
  }
  return results;
}

/**
 * The statement's text after the upsert's CTEs; `events` is the placeholder of the tracks' events
 * (a JSON array of `events` above), the one after the upsert's own. Constant text, run as a named statement:
 * its CTEs cost more to plan than to run.
 */
const trackText = (upsertCtes: string, events: string) => `
    WITH ${upsertCtes}, tracked AS (
      SELECT * FROM jsonb_to_recordset(${events}::jsonb)
        AS e(ord int, subscription_id text, id text, name text, data jsonb, created_at timestamptz)
    ), new_events AS (
      SELECT e.subscription_id AS id, u.id AS contact_id,
             CASE WHEN u.subscribed THEN 'contact.subscribed' ELSE 'contact.unsubscribed' END AS name, NULL::jsonb AS data, e.created_at
        FROM upserted AS u JOIN tracked AS e ON e.ord = u.ord
       WHERE NOT u.inserted AND u.old_subscribed IS DISTINCT FROM u.subscribed
      UNION ALL
      SELECT e.id, u.id, e.name, e.data, e.created_at FROM upserted AS u JOIN tracked AS e ON e.ord = u.ord
    ), inserted_events AS (
      INSERT INTO events (id, project_id, contact_id, name, data, created_at)
      SELECT id, $1, contact_id, name, data, created_at FROM new_events
      RETURNING id, project_id, contact_id, name, data, created_at
    ), ${eventRollupCtes('inserted_events')}, ${workflowEnrolCtes('inserted_events')}
    SELECT * FROM upserted`;

const TRACK_STATEMENT = {
  plain: { name: 'herald_track_statement_v3', text: trackText(CONTACTS_UPSERT_CTES.plain, '$4') },
  withFields: { name: 'herald_track_statement_fields_v3', text: trackText(CONTACTS_UPSERT_CTES.withFields, '$7') },
};
