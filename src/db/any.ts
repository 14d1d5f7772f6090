import { type AnyColumn, type SQL, sql } from 'drizzle-orm';

/**
 * `column = ANY($1::type[])`: the values as one array parameter. For the delivery batch's lists of
 * up to 100 ids or addresses, where Drizzle's `inArray` (a parameter each) cost the event loop
 * about three times as much to build, and gave PostgreSQL a different text for every list length.
 */
export const equalsAny = (column: AnyColumn, values: string[], type: 'uuid' | 'text'): SQL => sql`${column} = ANY(${sql.param(values)}::${sql.raw(type)}[])`;
