/** The condition tree of api-spec § Condition tree and decisions.md § 4, as stored and exchanged. */

export type Logic = 'AND' | 'OR';

export type Unit = 'minutes' | 'hours' | 'days' | 'weeks';

/** One test on one field. `operator` is kept as sent (aliases included); `value` and `unit` as the operator needs them. */
export type Filter = { field: string; operator: string; value?: unknown; unit?: Unit };

/** Filters and the nested tree are ANDed; a group needs at least one of them. */
export type Group = { filters: Filter[]; conditions?: Condition };

export type Condition = { logic: Logic; groups: Group[] };

/** A custom field's project type (contact_fields), also the type of each standard field. */
export type FieldType = 'string' | 'number' | 'boolean' | 'date';

export type EmailActivity = 'sent' | 'delivered' | 'opened' | 'clicked' | 'bounced' | 'complained';

export const EMAIL_ACTIVITIES: readonly EmailActivity[] = ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained'];

export const UNITS: Readonly<Record<Unit, number>> = {
  minutes: 60_000,
  hours: 3_600_000,
  days: 86_400_000,
  weeks: 604_800_000,
};
