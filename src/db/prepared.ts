import { createHash } from 'node:crypto';
import type { SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import type pg from 'pg';
import type { Db } from './client.ts';

const dialect = new PgDialect();

/**
 * A named statement: PostgreSQL parses and plans it once per connection instead of on every call,
 * which is most of the cost of a hot statement with several CTEs. The name carries a hash of the
 * text, so every shape of a query gets its own statement; use it only for statements whose text
 * does not grow with their input.
 */
export function preparedQuery(name: string, query: SQL | pg.QueryConfig): pg.QueryConfig {
  if ('text' in query) return query; // already a named statement
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
