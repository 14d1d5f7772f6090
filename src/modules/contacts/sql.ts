import { type SQL, sql } from 'drizzle-orm';
import type { ContactRecord } from './schemas.ts';

/** Shared SQL pieces of the contacts module: the record's columns and row mapping. */

/** A timestamptz as an ISO 8601 UTC string with milliseconds (the API's date-time format). */
export const isoMs = (column: string): SQL => sql.raw(`to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`);

/** The same with microseconds: exact, for cursors. */
export const isoUs = (column: string): SQL => sql.raw(`to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`);

/** The columns of a contact record, read from table alias `a`; `data` replaces the plain `a.data` (a list's budget). */
export const contactColumns = (a: string, data: SQL = sql.raw(`${a}.data`)): SQL =>
  sql.join(
    [
      sql.raw(`${a}.id, ${a}.email, ${a}.subscribed`),
      data,
      sql`${isoMs(`${a}.snoozed_until`)} AS snoozed_until`,
      sql`${isoMs(`${a}.created_at`)} AS created_at`,
      sql`${isoMs(`${a}.updated_at`)} AS updated_at`,
    ],
    sql`, `,
  );

export type ContactRow = {
  id: string;
  email: string;
  subscribed: boolean;
  data: Record<string, unknown>;
  snoozed_until: string | null;
  created_at: string;
  updated_at: string;
};

export function toContactRecord(row: ContactRow): ContactRecord {
  return {
    id: row.id,
    email: row.email,
    subscribed: row.subscribed,
    snoozedUntil: row.snoozed_until,
    data: row.data ?? {},
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** A text[] parameter (drizzle would otherwise expand a JS array into a list). */
export const textArray = (values: string[]): SQL => sql`${sql.param(values)}::text[]`;
