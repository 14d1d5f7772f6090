import { ApiError } from '../http/errors.ts';

/** Where in the tree a problem is: `groups[0].conditions.groups[1].filters[2]`, and the filter's field and operator. */
export type Place = { path: string; field?: string; operator?: string };

/** Every condition problem is a 400 BAD_REQUEST whose message and details name the place, field and operator. */
export function conditionError(message: string, place: Place): ApiError {
  const details: Record<string, unknown> = { path: place.path };
  if (place.field !== undefined) details.field = place.field;
  if (place.operator !== undefined) details.operator = place.operator;
  return new ApiError(400, 'BAD_REQUEST', message, { details });
}

/** `'x'` for messages, with long or odd values shortened. */
export function quote(value: unknown): string {
  const text = typeof value === 'string' ? `'${value}'` : (JSON.stringify(value) ?? String(value));
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
