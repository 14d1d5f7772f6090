import { finished } from 'node:stream/promises';
import { setImmediate } from 'node:timers/promises';
import { CsvError, parse } from 'csv-parse';
import { parse as parseSync } from 'csv-parse/sync';
import { badRequest } from '../../../http/errors.ts';
import { RESERVED_DATA_KEYS } from '../custom-data.ts';
import { MAX_CUSTOM_FIELDS } from '../field-cap.ts';
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
 * Bounds on the header row, checked before it is parsed (the api-spec is silent): no importable
 * file comes near them, and a hostile header of a million columns would otherwise cost seconds
 * of event loop. A project holds at most MAX_CUSTOM_FIELDS fields; twice that leaves room for the
 * email, filtered and unnamed columns.
 */
export const MAX_HEADER_CHARS = 64 * 1024;
export const MAX_COLUMNS = 2 * MAX_CUSTOM_FIELDS;

/** Column names echoed in a header error: the first few, each clipped. */
const ECHOED_COLUMNS = 20;
const ECHOED_NAME_CHARS = 100;

/** The first `max` UTF-16 units of `s`, without splitting a surrogate pair. */
export function clip(s: string, max: number): string {
  if (s.length <= max) return s;
  const last = s.charCodeAt(max - 1);
  return s.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}

/**
 * The first line (up to a line break outside quotes), with its delimiter (`;` when it holds more
 * semicolons than commas outside quotes, `,` otherwise) and its number of columns. As in
 * csv-parse with `relax_quotes`, a quote opens a quoted field only at the start of a field.
 * Throws 400 past MAX_HEADER_CHARS.
 */
function headerLine(text: string): { line: string; delimiter: Delimiter; columns: number } {
  let quoted = false;
  let fieldStart = true;
  let commas = 0;
  let semicolons = 0;
  let end = -1;
  const scanned = Math.min(text.length, MAX_HEADER_CHARS + 1);
  for (let i = 0; i < scanned; i++) {
    const ch = text[i];
    if (quoted) {
      if (ch === '"') {
        if (text[i + 1] === '"') i++;
        else quoted = false;
      }
      continue;
    }
    if (ch === '\n' || ch === '\r') {
      end = i;
      break;
    }
    quoted = ch === '"' && fieldStart;
    fieldStart = ch === ',' || ch === ';';
    if (ch === ',') commas++;
    else if (ch === ';') semicolons++;
  }
  if (end === -1) end = text.length;
  if (end > MAX_HEADER_CHARS) {
    throw badRequest(`The header row of the CSV file is longer than ${MAX_HEADER_CHARS} characters`, { maxCharacters: MAX_HEADER_CHARS });
  }
  const delimiter = semicolons > commas ? ';' : ',';
  return { line: text.slice(0, end), delimiter, columns: (delimiter === ';' ? semicolons : commas) + 1 };
}

const tooManyColumns = (columns: number) =>
  badRequest(`The CSV file has ${columns} columns; at most ${MAX_COLUMNS} can be imported`, { columns, maxColumns: MAX_COLUMNS });

/** A header's names as echoed in an error: the first few, clipped, with their total. */
const echoed = (names: string[]) => ({
  columns: names.slice(0, ECHOED_COLUMNS).map((n) => clip(n, ECHOED_NAME_CHARS)),
  columnCount: names.length,
});

/**
 * A column is stored under its name as a data key, and `data.a.b` reads a nested value, so a
 * name with a dot would be stored where no filter or field listing finds it. Herald has no
 * contacts export writing `data.<key>` headers, so the prefix is not mapped: the message says
 * what to name the column.
 */
function dottedColumn(name: string) {
  const bare = name.startsWith('data.') ? name.slice(5) : '';
  const hint = bare !== '' && !bare.includes('.') ? `: name the column '${bare}' (every column other than email becomes data.<column>)` : '';
  return badRequest(`The CSV column '${name}' contains a dot, which a custom field's name cannot hold${hint}`, { column: name });
}

/**
 * The column layout from the header row. Throws 400 when the header is too long or too wide,
 * when there is no `email` column, more than one, two columns with the same name, or a name
 * with a dot.
 */
export function layoutOf(text: string): Layout {
  const { line, delimiter, columns } = headerLine(text.startsWith(BOM) ? text.slice(1) : text);
  if (columns > MAX_COLUMNS) throw tooManyColumns(columns);
  let header: string[];
  try {
    header = (parseSync(line, { delimiter, relax_quotes: true }) as string[][])[0] ?? [];
  } catch {
    throw badRequest('The header row of the CSV file could not be read');
  }
  if (header.length > MAX_COLUMNS) throw tooManyColumns(header.length);
  const names = header.map((h) => h.trim());
  const emailColumns = names.flatMap((n, i) => (n.toLowerCase() === 'email' ? [i] : []));
  if (emailColumns.length === 0) {
    throw badRequest("The CSV file has no 'email' column: the first row must name the columns", echoed(names));
  }
  if (emailColumns.length > 1) throw badRequest("The CSV file has more than one 'email' column", echoed(names));
  const seen = new Set<string>();
  for (const n of names) {
    if (n === '') continue;
    const name = clip(n, ECHOED_NAME_CHARS);
    if (seen.has(n)) throw badRequest(`The CSV file has two columns named '${name}'`, { column: name });
    seen.add(n);
  }
  const keys = names.map((n, i) => (i === emailColumns[0] || n === '' || FILTERED_COLUMNS.has(n.toLowerCase()) ? null : n));
  const dotted = keys.find((k) => k?.includes('.'));
  if (dotted) throw dottedColumn(clip(dotted, ECHOED_NAME_CHARS));
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

/**
 * Read per chunk, a file lets the event loop run between chunks: the import runs in the API
 * process, whose requests, timers and other jobs must not wait for a whole 5 MB file. 16 KB is
 * parsed, and its records checked, in a few milliseconds.
 */
const CHUNK = 16 * 1024;

/**
 * The data records, chunk by chunk: csv-parse is fed 16 KB at a time and the records of each
 * chunk are yielded together (one promise per chunk, not per record), after a turn of the event
 * loop. `row` is the record's number in the file (the header is row 1). Records whose cells are
 * all empty are left out. Throws csv-parse's CsvError on a malformed file.
 */
export async function* csvRecordBatches(bytes: Buffer, delimiter: Delimiter): AsyncGenerator<CsvRecord[]> {
  const parser = parse({ bom: true, delimiter, relax_column_count: true, relax_quotes: true });
  let batch: CsvRecord[] = [];
  let row = 0;
  let failure: unknown = null;
  parser.on('data', (cells: string[]) => {
    row++;
    if (row > 1 && cells.some((c) => c.trim() !== '')) batch.push({ row, cells });
  });
  parser.on('error', (err) => (failure = err));
  const ended = finished(parser).catch(() => {}); // a failure is read from `failure`
  const chunks = Math.ceil(bytes.length / CHUNK);
  for (let i = 0; i <= chunks; i++) {
    if (i < chunks) parser.write(bytes.subarray(i * CHUNK, (i + 1) * CHUNK));
    else parser.end();
    // csv-parse hands its records and errors over within the turn; the loop runs meanwhile.
    await setImmediate();
    if (failure) throw failure;
    if (batch.length > 0) {
      yield batch;
      batch = [];
    }
  }
  await ended;
  if (failure) throw failure;
  if (batch.length > 0) yield batch;
}

/** A parse error, as the job's `failureReason`. */
export function describeCsvError(err: unknown): string | null {
  if (!(err instanceof CsvError)) return null;
  return `The CSV file could not be parsed: ${err.message}`;
}

export type RowCheck = { ok: true; email: string } | { ok: false; email: string; reason: ImportReason };

/** How much of a refused row's email cell its error keeps: the longest valid address. */
export const MAX_ERROR_EMAIL_CHARS = 254;

/** Whether a cell past the header's columns holds something. */
function hasExtraCells(layout: Layout, cells: string[]): boolean {
  for (let i = layout.keys.length; i < cells.length; i++) if (cells[i].trim() !== '') return true;
  return false;
}

/**
 * Whether a record can be imported: an email that is present and valid, and no cell beyond the
 * header. A refused row's `email` is its cell, clipped to MAX_ERROR_EMAIL_CHARS.
 */
export function checkRow(layout: Layout, cells: string[]): RowCheck {
  const raw = (cells[layout.emailIndex] ?? '').trim();
  if (hasExtraCells(layout, cells)) return { ok: false, email: clip(raw, MAX_ERROR_EMAIL_CHARS), reason: 'too_many_columns' };
  if (raw === '') return { ok: false, email: '', reason: 'missing_email' };
  // Without an `@` it cannot be an email: skip the costly failure path of the schema.
  const parsed = raw.includes('@') ? emailSchema.safeParse(raw) : null;
  if (!parsed?.success) return { ok: false, email: clip(raw, MAX_ERROR_EMAIL_CHARS), reason: 'invalid_email' };
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
