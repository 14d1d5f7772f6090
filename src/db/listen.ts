import pg from 'pg';
import type { Logger } from 'pino';

const RECONNECT_MS = 1000;

export type Listening = { close: () => Promise<void> };

/**
 * A connection of its own that LISTENs on `channel` and hands each notification's payload to
 * `onPayload`. When the connection is lost it calls `onLost` and connects again, every second
 * until it succeeds. Notifications sent while it is away are not delivered: each caller bounds
 * what a missed one costs (a cache's TTL, a poll).
 */
export async function listenOn(opts: {
  url: string;
  channel: string;
  applicationName: string;
  log: Logger;
  onPayload: (payload: string) => void;
  onLost?: () => void;
}): Promise<Listening> {
  let client: pg.Client | null = null;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;

  const connect = async () => {
    const c = new pg.Client({ connectionString: opts.url, application_name: opts.applicationName });
    c.on('notification', (msg) => msg.payload && opts.onPayload(msg.payload));
    c.on('error', (err) => {
      if (client !== c) return;
      opts.log.warn({ err }, `the ${opts.channel} listener lost its connection; reconnecting`);
      client = null;
      opts.onLost?.();
      reconnectSoon();
    });
    try {
      await c.connect();
      await c.query(`LISTEN ${opts.channel}`);
    } catch (err) {
      await c.end().catch(() => {});
      throw err;
    }
    if (closed) await c.end().catch(() => {});
    else client = c;
  };
  const reconnectSoon = () => {
    if (closed) return;
    retry = setTimeout(() => void connect().catch(reconnectSoon), RECONNECT_MS);
    retry.unref();
  };

  await connect();
  return {
    close: async () => {
      closed = true;
      clearTimeout(retry);
      await client?.end().catch(() => {});
    },
  };
}
