import { Readable } from 'node:stream';
import { sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { type BusySlots, busySlots } from '../../http/busy-slots.ts';

/**
 * GET /emails/:id/raw streams the captured source a slice at a time. Read whole, a 14 MB source
 * arrived from PostgreSQL as a 28 MB hex string, then a 14 MB Buffer: one download held the event
 * loop 107–230 ms, eight at once 700–860 ms and grew the process by 300–390 MB.
 * A slice is read by its own statement on any pooled connection, so a slow client holds no
 * connection. The stored source is written once (ON CONFLICT DO NOTHING) and only ever deleted,
 * so every slice read is of the same bytes, or finds the row gone: then the response is cut
 * short (it carries Content-Length, so the client sees a truncated answer, never a spliced one).
 */
export const RAW_CHUNK_BYTES = 1024 * 1024;
/** Downloads of one project under way at once, in a process: two let a second tab or retry through. */
export const RAW_DOWNLOADS_PER_PROJECT = 2;
/**
 * Downloads of all projects at once, in a process: each holds about two slices (one read ahead,
 * one in the socket's buffer) and the 1.4 MB base64 text of the slice being read, so this bounds them
 * to some 60 MB in all.
 */
export const RAW_DOWNLOADS_PER_PROCESS = 16;
/**
 * A client that takes no slice for this long (under about 17 KB/s) is cut off, so that sixteen
 * connections left open and unread cannot keep every other project's downloads refused.
 */
export const RAW_CLIENT_STALL_MS = 60_000;

export type RawSource = {
  /** Bytes of the whole source: the response's Content-Length. */
  size: number;
  /** The source, read slice by slice as the client takes it; releases its download slot when closed. */
  stream: Readable;
};

/** The counters of downloads under way (ctx.rawDownloads). */
export const rawDownloadSlots = (): BusySlots =>
  busySlots({
    perProject: RAW_DOWNLOADS_PER_PROJECT,
    perProcess: RAW_DOWNLOADS_PER_PROCESS,
    projectBusy: `This project already has ${RAW_DOWNLOADS_PER_PROJECT} email sources downloading`,
    processBusy: 'The server is busy sending email sources',
  });

/** The stored source's size in bytes, or null when none is stored. Reads no more than the TOAST pointer. */
export async function rawSourceSize(ctx: AppContext, emailId: string): Promise<number | null> {
  const { rows } = await ctx.database.db.execute<{ size: number }>(sql`SELECT octet_length(raw)::int AS size FROM email_raw WHERE email_id = ${emailId}`);
  return rows[0]?.size ?? null;
}

/**
 * A slice's rows: 48 KB each, as base64 (64 KB of text, without pg's line breaks). Not bytea: pg
 * sends it as hex, and decoding hex cost the event loop 3.6 ms a megabyte against 0.5 for base64.
 * Not one row for the slice: pg's parser grows a buffer by doubling for a message larger than a
 * socket read (64 KB), 4 MB of short-lived buffers for one 1.4 MB row, and that garbage set off
 * a full collection every 8 MB streamed. The slice is read from the table once, then cut up.
 */
const PIECE_BYTES = 48 * 1024;

async function readRawSlice(ctx: AppContext, emailId: string, offset: number, length: number): Promise<Buffer[]> {
  const { rows } = await ctx.database.db.execute<{ piece: string }>(sql`
    WITH slice AS MATERIALIZED (
      SELECT substring(raw FROM ${offset + 1}::int FOR ${length}::int) AS bytes FROM email_raw WHERE email_id = ${emailId}
    )
    SELECT translate(encode(substring(slice.bytes FROM at FOR ${PIECE_BYTES}::int), 'base64'), chr(10), '') AS piece
      FROM slice, generate_series(1, octet_length(slice.bytes), ${PIECE_BYTES}::int) AS at
     ORDER BY at`);
  if (rows.length === 0) throw new Error(`The stored source of email ${emailId} was cleared while it was being downloaded`);
  const pieces = rows.map((r) => Buffer.from(r.piece, 'base64'));
  const read = pieces.reduce((n, b) => n + b.length, 0);
  if (read !== length) throw new Error(`The stored source of email ${emailId} changed while it was being downloaded`);
  return pieces;
}

/**
 * Streams `size` bytes of the email's stored source, RAW_CHUNK_BYTES per statement. Readable asks
 * for the next slice only once the one before has left its buffer (for the socket's), so a slow
 * client holds about two slices. A failed read destroys the stream, and Fastify the response.
 */
export function rawSourceStream(ctx: AppContext, emailId: string, size: number, onClose: () => void): Readable {
  let offset = 0;
  const stalled = setTimeout(() => stream.destroy(new Error(`The client took no data for ${RAW_CLIENT_STALL_MS} ms`)), RAW_CLIENT_STALL_MS);
  stalled.unref();
  const stream = new Readable({
    read() {
      stalled.refresh();
      if (offset >= size) {
        this.push(null);
        return;
      }
      const length = Math.min(RAW_CHUNK_BYTES, size - offset);
      readRawSlice(ctx, emailId, offset, length).then(
        (pieces) => {
          if (this.destroyed) return;
          offset += length;
          for (const piece of pieces) this.push(piece);
        },
        (err: unknown) => this.destroy(err instanceof Error ? err : new Error(String(err))),
      );
    },
  });
  stream.once('close', () => {
    clearTimeout(stalled);
    onClose();
  });
  return stream;
}
