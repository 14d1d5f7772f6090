import { type SQL, sql } from 'drizzle-orm';
import { scheduleSegmentReevaluation } from '../segments/membership.ts';
import type { AppContext } from '../../context.ts';
import { type Db, withTransaction } from '../../db/client.ts';
import { conflict, fieldErrors, notFound, validationError } from '../../http/errors.ts';
import { type NewEvent, recordEvent } from '../events/record.ts';
import { type DataChanges, fieldTypesOf, splitCustomData } from './custom-data.ts';
import { CONTACT_ID, type ContactRecord, type UpdateContactInput, emailSchema, normaliseEmail } from './schemas.ts';
import { clientOf, executePrepared } from '../../db/prepared.ts';
import { type ContactRow, contactColumns, textArray, toContactRecord } from './sql.ts';
import { upsertContactQuery } from './upsert-sql.ts';
import { pgErrorCode } from '../../db/pg-error.ts';
import { checkFieldCapacity } from './field-cap.ts';
import { contactDataTooBig, dataBoundCte, mergedData, recordFieldTypesOf } from './data-sql.ts';
import { afterContactsDeleted } from './deleted.ts';
import { deleteContactEvents, hasManyEvents } from '../events/usage.ts';

export { upsertContactQuery } from './upsert-sql.ts';

export type { ContactRecord } from './schemas.ts';

export type UpsertInput = { email: string; subscribed?: boolean; data?: Record<string, unknown> };
export type UpsertResult = { contact: ContactRecord; isNew: boolean; isUpdate: boolean; oneOff: Record<string, unknown> };

type UpsertRow = ContactRow & { inserted: boolean; existed: boolean; old_subscribed: boolean | null; data_same: boolean; data_refused: boolean };

/**
 * Creates the contact or merges into the existing one (by email, case-insensitive), in one
 * statement, safe under concurrency. A new contact emits no subscription event; an existing one
 * emits `contact.subscribed`/`contact.unsubscribed` when its state changes. A write that would take
 * the contact's data over MAX_CONTACT_DATA_BYTES is a 422 and changes nothing. Pass a transaction's
 * `tx` to keep the event in the caller's transaction.
 */
export async function upsertContact(db: Db, projectId: string, input: UpsertInput, opts: { defaultSubscribed: boolean; now?: Date }): Promise<UpsertResult> {
  const checked = emailSchema.safeParse(input.email);
  if (!checked.success) throw validationError(fieldErrors(checked.error, ['email']));
  const now = opts.now ?? new Date();
  const { query, changes } = upsertContactQuery(projectId, input, { defaultSubscribed: opts.defaultSubscribed, now });
  let { rows } = await clientOf(db).query<UpsertRow>(query);
  if (rows.length === 0) {
    // The field cap held the write back (upsert-sql.ts): the 422 comes from here, unless fields
    // were deleted meanwhile, and then the write goes again.
    await checkFieldCapacity(db, projectId, fieldTypesOf(changes.set).keys);
    ({ rows } = await clientOf(db).query<UpsertRow>(query));
  }
  const row = rows[0];
  if (!row) throw new Error('the contact upsert wrote nothing twice');
  if (row.data_refused) throw contactDataTooBig();
  const contact = toContactRecord(row);
  if (row.inserted) return { contact, isNew: true, isUpdate: false, oneOff: changes.oneOff };
  // `existed` is false only when another transaction created the contact during this statement:
  // its previous state is unknown, so it counts as updated and emits no event.
  if (!row.existed) return { contact, isNew: false, isUpdate: true, oneOff: changes.oneOff };
  const subscriptionChanged = row.old_subscribed !== row.subscribed;
  if (subscriptionChanged) await recordSubscriptionEvent(db, projectId, contact, now);
  return { contact, isNew: false, isUpdate: subscriptionChanged || !row.data_same, oneOff: changes.oneOff };
}

/** The contact.subscribed / contact.unsubscribed event for the contact's new state. */
export const subscriptionEvent = (
  projectId: string,
  contact: Pick<ContactRecord, 'id' | 'subscribed'>,
  now: Date,
  data?: Record<string, unknown>,
): NewEvent => ({
  projectId,
  contactId: contact.id,
  name: contact.subscribed ? 'contact.subscribed' : 'contact.unsubscribed',
  data: data ?? null,
  createdAt: now,
});

async function recordSubscriptionEvent(db: Db, projectId: string, contact: ContactRecord, now: Date, data?: Record<string, unknown>): Promise<void> {
  await recordEvent(db, subscriptionEvent(projectId, contact, now, data));
}

/** A contact's subscription state, without its `data` (up to 1 MB of JSON). */
export type ContactSubscription = { id: string; email: string; subscribed: boolean };

/**
 * Sets the subscription state and emits the event (with `eventData`) when it changes. The new
 * state when it changed; null when it did not (already in that state, or no such contact). Never
 * the contact's `data`: the recipient pages call this for anyone holding a link, on a contact the
 * public key may have filled with 1 MB of it.
 */
export async function setSubscribed(
  db: Db,
  projectId: string,
  contactId: string,
  subscribed: boolean,
  eventData?: Record<string, unknown>,
  opts: { now?: Date } = {},
): Promise<ContactSubscription | null> {
  if (!CONTACT_ID.test(contactId)) return null;
  const now = opts.now ?? new Date();
  const { rows } = await executePrepared<ContactSubscription>(
    db,
    'contacts_set_subscribed_state',
    sql`
    UPDATE contacts AS c SET subscribed = ${subscribed}, updated_at = ${now.toISOString()}::timestamptz
     WHERE c.id = ${contactId} AND c.project_id = ${projectId} AND c.subscribed <> ${subscribed}
    RETURNING c.id, c.email, c.subscribed`,
  );
  const changed = rows[0];
  if (!changed) return null;
  await recordEvent(db, subscriptionEvent(projectId, changed, now, eventData));
  return { id: changed.id, email: changed.email, subscribed: changed.subscribed };
}

async function findContact(db: Db, projectId: string, contactId: string): Promise<ContactRecord | null> {
  if (!CONTACT_ID.test(contactId)) return null;
  const { rows } = await executePrepared<ContactRow>(
    db,
    'contacts_by_id',
    sql`SELECT ${contactColumns('c')} FROM contacts AS c WHERE c.id = ${contactId} AND c.project_id = ${projectId}`,
  );
  return rows[0] ? toContactRecord(rows[0]) : null;
}

/** The contact, or 404 CONTACT_NOT_FOUND (also for another project's contact or a malformed id). */
export async function getContact(db: Db, projectId: string, contactId: string): Promise<ContactRecord> {
  const contact = await findContact(db, projectId, contactId);
  if (!contact) throw notFound('contact', contactId);
  return contact;
}

export async function findContactByEmail(db: Db, projectId: string, email: string): Promise<ContactRecord | null> {
  const { rows } = await executePrepared<ContactRow>(
    db,
    'contacts_by_email',
    sql`SELECT ${contactColumns('c')} FROM contacts AS c WHERE c.project_id = ${projectId} AND c.email = ${normaliseEmail(email)}`,
  );
  return rows[0] ? toContactRecord(rows[0]) : null;
}

/**
 * PATCH: changes only what is sent, in one statement that locks the row to learn its previous
 * subscription state. A taken email is 409 and changes nothing.
 */
export async function updateContact(
  db: Db,
  projectId: string,
  contactId: string,
  input: UpdateContactInput,
  opts: { now?: Date } = {},
): Promise<ContactRecord> {
  if (!CONTACT_ID.test(contactId)) throw notFound('contact', contactId);
  const now = opts.now ?? new Date();
  const iso = now.toISOString();
  const changes = splitCustomData(input.data);
  await checkFieldCapacity(db, projectId, fieldTypesOf(changes.set).keys);
  const unset = textArray(changes.unset);
  const set = sql`${JSON.stringify(changes.set)}::jsonb`;
  const data = mergedData(sql`c.data`, unset, set);
  const email = input.email ?? null;
  const sub = input.subscribed ?? null;
  let rows: (ContactRow & { old_subscribed: boolean; data_refused: boolean })[];
  try {
    ({ rows } = await executePrepared<ContactRow & { old_subscribed: boolean; data_refused: boolean }>(
      db,
      'contacts_patch',
      sql`
      WITH old AS MATERIALIZED (
        SELECT ${contactColumns('c')} FROM contacts AS c WHERE c.id = ${contactId} AND c.project_id = ${projectId} FOR UPDATE
      )${dataBoundCte(unset, set)}${recordFieldTypesOf(projectId, changes.set, iso, sql`EXISTS (SELECT 1 FROM bound WHERE NOT refused)`)}, changed AS (
        UPDATE contacts AS c SET
          email = COALESCE(${email}::text, c.email),
          subscribed = COALESCE(${sub}::boolean, c.subscribed),
          data = ${data},
          updated_at = ${iso}::timestamptz
          FROM old JOIN bound ON bound.id = old.id
         WHERE c.id = old.id AND NOT bound.refused
           AND (COALESCE(${email}::text, c.email) <> c.email OR COALESCE(${sub}::boolean, c.subscribed) <> c.subscribed OR ${data} <> c.data)
        RETURNING ${contactColumns('c')}, old.subscribed AS old_subscribed, false AS data_refused
      )
      -- A contact the change leaves as it was is not written (no new row version): it is answered as
      -- locked, as is one the data bound refused (flagged: the 422).
      SELECT * FROM changed
      UNION ALL SELECT o.*, o.subscribed, b.refused FROM old AS o JOIN bound AS b ON b.id = o.id WHERE NOT EXISTS (SELECT 1 FROM changed)`,
    ));
  } catch (err) {
    if (pgErrorCode(err) === '23505') {
      throw conflict('Another contact in this project already uses this email', { email });
    }
    throw err;
  }
  if (rows.length === 0) throw notFound('contact', contactId);
  if (rows[0].data_refused) throw contactDataTooBig();
  const contact = toContactRecord(rows[0]);
  if (rows[0].old_subscribed !== contact.subscribed) await recordSubscriptionEvent(db, projectId, contact, now);
  return contact;
}

/**
 * The same `data` change applied to many contacts of a project in one statement (a workflow batch's
 * UPDATE_CONTACT step): updateContact's merge and field-type rules, without email or subscription
 * changes (so no event). Throws CONTACT_NOT_FOUND when one of them no longer exists, and the data
 * bound's 422 (writing nothing) when the change would take one of them over it.
 */
export async function updateContactsData(
  db: Db,
  projectId: string,
  contactIds: string[],
  input: Record<string, unknown> | undefined,
  opts: { now: Date },
): Promise<Map<string, ContactRecord>> {
  const iso = opts.now.toISOString();
  const changes = splitCustomData(input);
  await checkFieldCapacity(db, projectId, fieldTypesOf(changes.set).keys);
  const unset = textArray(changes.unset);
  const set = sql`${JSON.stringify(changes.set)}::jsonb`;
  const data = mergedData(sql`c.data`, unset, set);
  const noneRefused = sql`NOT EXISTS (SELECT 1 FROM bound WHERE refused)`;
  // Only a contact whose data changes is written; one that already holds the values is answered
  // as `old` locked it (no new row version), as the upserts do (upsert-sql.ts). The locks are
  // taken in email order, the order of the grouped upsert (upsert-many.ts), so the two cannot
  // deadlock; NO KEY, as the update leaves the key alone: an event or email naming the contact
  // meanwhile need not wait. When the data bound refuses one contact's change, none is written.
  const { rows } = await db.execute<ContactRow & { data_refused: boolean }>(sql`
    WITH old AS MATERIALIZED (
      SELECT ${contactColumns('c')} FROM contacts AS c
       WHERE c.id = ANY(${textArray(contactIds)}) AND c.project_id = ${projectId} ORDER BY c.email FOR NO KEY UPDATE
    )${dataBoundCte(unset, set)}${recordFieldTypesOf(projectId, changes.set, iso, sql`EXISTS (SELECT 1 FROM old) AND ${noneRefused}`)}, changed AS (
      UPDATE contacts AS c SET data = ${data}, updated_at = ${iso}::timestamptz
        FROM old WHERE c.id = old.id AND ${data} <> c.data AND ${noneRefused}
      RETURNING ${contactColumns('c')}, false AS data_refused
    )
    SELECT * FROM changed
    UNION ALL SELECT o.*, b.refused FROM old AS o JOIN bound AS b ON b.id = o.id WHERE o.id NOT IN (SELECT id FROM changed)`);
  if (rows.some((r) => r.data_refused)) throw contactDataTooBig();
  const updated = new Map(rows.map((r) => [r.id, toContactRecord(r)]));
  const missing = contactIds.find((id) => !updated.has(id));
  if (missing) throw notFound('contact', missing);
  return updated;
}

/**
 * Permanent; the contact's events go with it and its emails stay without it, in the same
 * transaction (./deleted.ts). A contact with more than a batch of events (a bot's millions: 500,000 went in
 * one 1.1 s statement, and grew with them) has them deleted in short batches first
 * (events/usage.ts; 429 while the project has another delete of many events under way, 409 if a
 * batch is held past its bound); then its row and what is left.
 */
export async function deleteContact(ctx: AppContext, projectId: string, contactId: string): Promise<void> {
  if (!CONTACT_ID.test(contactId)) throw notFound('contact', contactId);
  if (await hasManyEvents(ctx.database.db, projectId, contactId)) await deleteContactEvents(ctx, projectId, contactId);
  await withTransaction(ctx.database, async ({ tx }) => {
    const { rowCount } = await tx.execute(sql`DELETE FROM contacts WHERE id = ${contactId} AND project_id = ${projectId}`);
    if (!rowCount) throw notFound('contact', contactId);
    await afterContactsDeleted(tx, projectId, [contactId], ctx.clock.now());
  });
}

/** Bulk existence check: each distinct (normalised) email once, in input order. */
export async function lookupContacts(db: Db, projectId: string, emails: string[]): Promise<{ found: { id: string; email: string }[]; notFound: string[] }> {
  const wanted = [...new Set(emails.map(normaliseEmail))];
  const { rows } = await db.execute<{ id: string; email: string }>(
    sql`SELECT id, email FROM contacts WHERE project_id = ${projectId} AND email = ANY(${textArray(wanted)})`,
  );
  const byEmail = new Map(rows.map((r) => [r.email, r.id]));
  const found: { id: string; email: string }[] = [];
  const missing: string[] = [];
  for (const email of wanted) {
    const id = byEmail.get(email);
    if (id) found.push({ id, email });
    else missing.push(email);
  }
  return { found, notFound: missing };
}

// Route-level operations: they choose the transaction, so a request without a subscription
// change stays a single statement. POST /contacts: save.ts.

export async function patchContact(ctx: AppContext, projectId: string, contactId: string, input: UpdateContactInput): Promise<ContactRecord> {
  const opts = { now: ctx.clock.now() };
  const contact =
    input.subscribed === undefined
      ? await updateContact(ctx.database.db, projectId, contactId, input, opts)
      : await withTransaction(ctx.database, ({ tx }) => updateContact(tx, projectId, contactId, input, opts));
  await scheduleSegmentReevaluation(ctx, projectId, contact.id);
  return contact;
}
