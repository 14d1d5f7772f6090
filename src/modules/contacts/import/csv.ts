import { Readable } from 'node:stream';
import { CsvError, parse } from 'csv-parse';
import { parse as parseSync } from 'csv-parse/sync';
import { badRequest } from '../../../http/errors.ts';
import { RESERVED_DATA_KEYS } from '../custom-data.ts';
import { emailSchema } from '../schemas.ts';
import type { ImportReason } from './schemas.ts';

/** Reading the CSV: the checks done at upload, the column layout, streamed records and cell values. */

export type Delimiter = ',' | ';';

/** What the header row says: the delimiter, where the email is and which key each other column fills. */
export type Layout = {
  delimiter: Delimiter;
  emailIndex: number;
  /** One entry per column: the `data` key it fills, or null (the email column, filtered or unnamed). */
  keys: (string | null)[];
};

/** api-spec CSV rule 4 (and the keys no `data` may hold), compared case-insensitively. */
const FILTERED_COLUMNS = new Set(['id', 'subscribed', 'createdAt', 'updatedAt', ...RESERVED_DATA_KEYS].map((c) => c.toLowerCase()));

const UTF8 = new TextDecoder('utf-8', { fatal: true });
const BOM = '\uFEFF';

/**
 * The first line (up to a line break outside quotes), with its delimiter: `;` when it holds more
 * semicolons than commas outside quotes, `,` otherwise.
 */
function headerLine(text: string): { line: string; delimiter: Delimiter } {
  let quoted = false;
  let commas = 0;
  let semicolons = 0;
  let end = text.length;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === '"') quoted = !quoted;
    else if (quoted) continue;
    else if (ch === ',') commas++;
    else if (ch === ';') semicolons++;
    else if (ch === '\n' || ch === '\r') {
      end = i;
      break;
    }
  }
  return { line: text.slice(0, end), delimiter: semicolons > commas ? ';' : ',' };
}

/**
 * The column layout from the header row. Throws 400 when there is no `email` column, more than
 * one, or two columns with the same name.
 */
export function layoutOf(text: string): Layout {
  const { line, delimiter } = headerLine(text.startsWith(BOM) ? text.slice(1) : text);
  let header: string[];
  try {
    header = (parseSync(line, { delimiter, relax_quotes: true }) as string[][])[0] ?? [];
  } catch {
    throw badRequest('The header row of the CSV file could not be read');
  }
  const names = header.map((h) => h.trim());
  const emailColumns = names.flatMap((n, i) => (n.toLowerCase() === 'email' ? [i] : []));
  if (emailColumns.length === 0) {
    throw badRequest("The CSV file has no 'email' column: the first row must name the columns", { columns: names });
  }
  if (emailColumns.length > 1) throw badRequest("The CSV file has more than one 'email' column", { columns: names });
  const seen = new Set<string>();
  for (const n of names) {
    if (n === '') continue;
    if (seen.has(n)) throw badRequest(`The CSV file has two columns named '${n}'`, { column: n });
    seen.add(n);
  }
  const keys = names.map((n, i) => (i === emailColumns[0] || n === '' || FILTERED_COLUMNS.has(n.toLowerCase()) ? null : n));
  return { delimiter, emailIndex: emailColumns[0], keys };
}

/** The upload checks done before anything is queued: text (no NUL byte), valid UTF-8, a usable header. */
export function checkUpload(bytes: Buffer): Layout {
  if (bytes.length === 0) throw badRequest('The file is empty');
  if (bytes.includes(0)) throw badRequest('The file is not a CSV text file: it contains binary data');
  let text: string;
  try {
    text = UTF8.decode(bytes);
  } catch {
    throw badRequest('The file is not valid UTF-8: save the CSV with UTF-8 encoding');
  }
  return layoutOf(text);
}

/** The layout of stored bytes (checked at upload, so they decode). */
export const layoutOfBytes = (bytes: Buffer): Layout => layoutOf(UTF8.decode(bytes));

export type CsvRecord = { row: number; cells: string[] };

const CHUNK = 64 * 1024;

function* chunks(bytes: Buffer): Generator<Buffer> {
  for (let i = 0; i < bytes.length; i += CHUNK) yield bytes.subarray(i, i + CHUNK);
}

/**
 * The data records, streamed through csv-parse in 64 KB chunks. `row` is the record's number in
 * the file (the header is row 1). Records whose cells are all empty are left out.
 */
export async function* csvRecords(bytes: Buffer, delimiter: Delimiter): AsyncGenerator<CsvRecord> {
  const parser = Readable.from(chunks(bytes)).pipe(parse({ bom: true, delimiter, relax_column_count: true, relax_quotes: true }));
  let row = 0;
  for await (const cells of parser as AsyncIterable<string[]>) {
    row++;
    if (row === 1 || cells.every((c) => c.trim() === '')) continue;
    yield { row, cells };
  }
}

/** A parse error, as the job's `failureReason`. */
export function describeCsvError(err: unknown): string | null {
  if (!(err instanceof CsvError)) return null;
  return `The CSV file could not be parsed: ${err.message}`;
}

export type RowCheck = { ok: true; email: string } | { ok: false; email: string; reason: ImportReason };

/** Whether a record can be imported: an email that is present and valid, and no cell beyond the header. */
export function checkRow(layout: Layout, cells: string[]): RowCheck {
  const raw = (cells[layout.emailIndex] ?? '').trim();
  if (cells.length > layout.keys.length && cells.slice(layout.keys.length).some((c) => c.trim() !== '')) {
    return { ok: false, email: raw, reason: 'too_many_columns' };
  }
  if (raw === '') return { ok: false, email: '', reason: 'missing_email' };
  const parsed = emailSchema.safeParse(raw);
  if (!parsed.success) return { ok: false, email: raw, reason: 'invalid_email' };
  return { ok: true, email: parsed.data };
}

const NUMBER = /^-?(0|[1-9]\d*)(\.\d+)?$/;
const MAX_DIGITS = 15; // every decimal of at most 15 significant digits survives a double round trip

/**
 * A cell's value (api-spec CSV rules 5–7): `true/false/yes/no` → boolean; plain integers and
 * decimals → number (a leading zero, `+`, exponent or more than 15 digits keep the text); anything
 * else stays a string (dates are strings whose type is inferred as `date`). Surrounding spaces are
 * trimmed; an empty cell is `''`, which the custom-data rules ignore.
 */
export function cellValue(raw: string): string | number | boolean {
  const v = raw.trim();
  if (v.length <= 5) {
    const lower = v.toLowerCase();
    if (lower === 'true' || lower === 'yes') return true;
    if (lower === 'false' || lower === 'no') return false;
  }
  if (NUMBER.test(v) && v.replace(/^-?0?\.?0*|\./g, '').length <= MAX_DIGITS) return Number(v);
  return v;
}

/** The `data` a record brings: every named, unfiltered column, by its header name. */
export function rowData(layout: Layout, cells: string[]): Record<string, unknown> {
  const data: Record<string, unknown> = Object.create(null);
  const n = Math.min(cells.length, layout.keys.length);
  for (let i = 0; i < n; i++) {
    const key = layout.keys[i];
    if (key !== null) data[key] = cellValue(cells[i]);
  }
  return data;
}
