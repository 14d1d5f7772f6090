import pg from 'pg';

/**
 * Every statement the `pg` clients of this test process send, in order, from the first call of
 * `recordStatements` on (all of Herald's connections, as pg_stat_statements would count them):
 * its text (a named statement's too), its parameters and the database it went to. Passed on
 * unchanged.
 */
export type Recorded = { texts: string[]; params: unknown[][]; databases: (string | undefined)[] };

let recorded: Recorded | null = null;

export function recordStatements(): Recorded {
  if (recorded) return recorded;
  const r: Recorded = { texts: [], params: [], databases: [] };
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, ...args: Parameters<pg.Client['query']>) {
    const q = args[0] as unknown;
    r.texts.push(typeof q === 'string' ? q : ((q as { text?: string; name?: string })?.text ?? (q as { name?: string })?.name ?? '?'));
    const values = Array.isArray(args[1]) ? args[1] : (q as { values?: unknown[] })?.values;
    r.params.push(values ?? []);
    r.databases.push(this.database);
    return (query as (...a: unknown[]) => unknown).apply(this, args);
  } as pg.Client['query'];
  recorded = r;
  return r;
}
