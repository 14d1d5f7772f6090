import { badRequest } from './errors.ts';

/** Opaque cursors: base64url JSON of the last row's sort value and id. */
export function encodeCursor(sortValue: string | number, id: string): string {
  return Buffer.from(JSON.stringify([sortValue, id])).toString('base64url');
}

export function decodeCursor(cursor: string): { sortValue: string | number; id: string } {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(parsed) && parsed.length === 2 && (typeof parsed[0] === 'string' || typeof parsed[0] === 'number') && typeof parsed[1] === 'string') {
      return { sortValue: parsed[0], id: parsed[1] };
    }
  } catch {
    // fall through
  }
  throw badRequest('Invalid cursor', { cursor });
}
