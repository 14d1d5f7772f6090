import { createHash } from 'node:crypto';
import { type SQL, sql } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import type pg from 'pg';
import type { Db } from '../../db/client.ts';
import type { ContactRecord } from './schemas.ts';

/** Shared SQL pieces of the contacts module: the record's columns and row mapping. */

/** A timestamptz as an ISO 8601 UTC string with milliseconds (the API's date-time format). */
export const isoMs = (column: string): SQL => sql.raw(`to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`);

/** The same with microseconds: exact, for cursors. */
export const isoUs = (column: string): SQL => sql.raw(`to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`);

/** The columns of a contact record, read from table alias `a`. */
export const contactColumns = (a: string): SQL =>
  sql.join(
    [
      sql.raw(`${a}.id, ${a}.email, ${a}.subscribed, ${a}.data`),
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

const dialect = new PgDialect();

/**
 * A named statement: PostgreSQL parses and plans it once per connection instead of on every call,
 * which is most of the cost of the upsert's CTEs. The name carries a hash of the text, so every
 * shape of a query gets its own statement.
 */
export function preparedQuery(name: string, query: SQL | pg.QueryConfig): pg.QueryConfig {
  if ('text' in query) return query; // already a named statement (upsertContactQuery)
  const { sql: text, params } = dialect.sqlToQuery(query);
  const hash = createHash('sha1').update(text).digest('hex').slice(0, 16);
  return { name: `${name}_${hash}`, text, values: params };
}

/** The pool or transaction client under a Drizzle handle, for statements run as named statements. */
export function clientOf(db: Db): pg.Pool | pg.PoolClient {
  const client = (db as Db & { $client?: pg.Pool | pg.PoolClient }).$client;
  if (!client) throw new Error('Drizzle handle without a pg client');
  return client;
}

/** Runs a hot-path statement as a named statement on the Drizzle handle's pool or transaction client. */
export async function executePrepared<T extends pg.QueryResultRow>(db: Db, name: string, query: SQL): Promise<pg.QueryResult<T>> {
  return clientOf(db).query<T>(preparedQuery(name, query));
}
