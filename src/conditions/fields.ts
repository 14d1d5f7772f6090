import { UUID } from '../db/ids.ts';
import { isStorableText } from '../db/storable-text.ts';
import { type Place, conditionError, quote } from './errors.ts';
import { EMAIL_ACTIVITIES, type EmailActivity, type FieldType } from './types.ts';

/** The standard contact fields a filter can name, with their column in `contacts` and their type. */
export const COLUMNS = {
  email: { column: 'email', type: 'string' },
  subscribed: { column: 'subscribed', type: 'boolean' },
  createdAt: { column: 'created_at', type: 'date' },
  updatedAt: { column: 'updated_at', type: 'date' },
} as const satisfies Record<string, { column: string; type: FieldType }>;

export type ColumnName = keyof typeof COLUMNS;

/** What a filter's `field` names. */
export type FieldRef =
  | { kind: 'column'; name: ColumnName }
  | { kind: 'data'; key: string; path: string[] }
  | { kind: 'event'; name: string }
  | { kind: 'email'; activity: EmailActivity }
  | { kind: 'segment'; segmentId: string };

const MAX_KEY = 255;

const FIELD_HELP = 'use email, subscribed, createdAt, updatedAt, data.<key>, event.<name>, email.<activity> or segment.<id>';

/** Parses a filter's `field`; 400 naming the field when it is not one decisions.md § 4 allows. */
export function parseField(field: unknown, place: Place): FieldRef {
  if (typeof field !== 'string' || field === '') {
    throw conditionError(`Filter at ${place.path} needs a field: ${FIELD_HELP}`, place);
  }
  if (!isStorableText(field)) throw conditionError(`Field name at ${place.path} contains characters that cannot be stored`, place);
  if (field in COLUMNS) return { kind: 'column', name: field as ColumnName };
  const dot = field.indexOf('.');
  const prefix = dot < 0 ? field : field.slice(0, dot);
  const rest = dot < 0 ? '' : field.slice(dot + 1);
  switch (prefix) {
    case 'data': {
      const path = rest.split('.');
      if (rest === '' || rest.length > MAX_KEY || path.some((p) => p === '')) {
        throw conditionError(`Invalid field ${quote(field)}: data.<key> needs a key of 1 to ${MAX_KEY} characters without empty parts`, place);
      }
      return { kind: 'data', key: rest, path };
    }
    case 'event':
      if (rest === '' || rest.length > MAX_KEY) {
        throw conditionError(`Invalid field ${quote(field)}: event.<name> needs an event name of 1 to ${MAX_KEY} characters`, place);
      }
      return { kind: 'event', name: rest };
    case 'email':
      if (!(EMAIL_ACTIVITIES as readonly string[]).includes(rest)) {
        throw conditionError(`Invalid field ${quote(field)}: email activities are ${EMAIL_ACTIVITIES.join(', ')}`, place);
      }
      return { kind: 'email', activity: rest as EmailActivity };
    case 'segment':
      if (!UUID.test(rest)) throw conditionError(`Invalid field ${quote(field)}: segment.<id> needs a segment id (uuid)`, place);
      return { kind: 'segment', segmentId: rest.toLowerCase() };
    default:
      throw conditionError(`Unknown field ${quote(field)}: ${FIELD_HELP}`, place);
  }
}

/** What decides which operators fit a field: a value type, tracked activity, or segment membership. */
export type FieldKind = FieldType | 'activity' | 'segment';
