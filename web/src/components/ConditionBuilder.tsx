import { ActionIcon, Autocomplete, Button, Card, Group, NumberInput, SegmentedControl, Select, Stack, TagsInput, Text, TextInput } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { type ReactNode, useState } from 'react';
import { herald } from '../api.ts';
import { useProjectId } from '../hooks.ts';

/**
 * The visual editor of a condition tree (api-spec § Condition tree, decisions.md § Conditions):
 * the root's groups are joined by AND or OR; inside a group every filter must match, and so must
 * its nested tree. Fields come from GET /contacts/fields (standard and typed custom fields), event
 * names from GET /events/names, the six email activities, and the project's other segments.
 */

export type Logic = 'AND' | 'OR';
export type Unit = 'minutes' | 'hours' | 'days' | 'weeks';
export type Filter = { field: string; operator: string; value?: unknown; unit?: Unit };
export type Group = { filters: Filter[]; conditions?: Condition };
export type Condition = { logic: Logic; groups: Group[] };

type ValueType = 'string' | 'number' | 'boolean' | 'date';
type Kind = ValueType | 'activity' | 'segment';

/** A field's kind: its catalogue type, else activity (`event.*`, `email.*`), segment, or text. */
export const kindByType =
  (types: Map<string, ValueType>) =>
  (field: string): Kind => {
    const known = types.get(field);
    if (known) return known;
    if (field.startsWith('event.') || field.startsWith('email.')) return 'activity';
    if (field.startsWith('segment.')) return 'segment';
    return 'string';
  };
type Shape = 'none' | 'scalar' | 'list' | 'duration' | 'count';

export const EMAIL_ACTIVITIES = ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained'] as const;
const UNITS: Unit[] = ['minutes', 'hours', 'days', 'weeks'];
const MAX_DEPTH = 10;

/** Operators per field kind with their labels and value shapes (the server's operator table). */
const OPERATORS: Record<Kind, { value: string; label: string; shape: Shape }[]> = {
  string: [
    { value: 'equals', label: 'is', shape: 'scalar' },
    { value: 'notEquals', label: 'is not', shape: 'scalar' },
    { value: 'contains', label: 'contains', shape: 'scalar' },
    { value: 'notContains', label: 'does not contain', shape: 'scalar' },
    { value: 'startsWith', label: 'starts with', shape: 'scalar' },
    { value: 'endsWith', label: 'ends with', shape: 'scalar' },
    { value: 'in', label: 'is one of', shape: 'list' },
    { value: 'notIn', label: 'is none of', shape: 'list' },
    { value: 'exists', label: 'is set', shape: 'none' },
    { value: 'notExists', label: 'is not set', shape: 'none' },
  ],
  number: [
    { value: 'equals', label: '=', shape: 'scalar' },
    { value: 'notEquals', label: '≠', shape: 'scalar' },
    { value: 'greaterThan', label: '>', shape: 'scalar' },
    { value: 'greaterThanOrEqual', label: '≥', shape: 'scalar' },
    { value: 'lessThan', label: '<', shape: 'scalar' },
    { value: 'lessThanOrEqual', label: '≤', shape: 'scalar' },
    { value: 'in', label: 'is one of', shape: 'list' },
    { value: 'notIn', label: 'is none of', shape: 'list' },
    { value: 'exists', label: 'is set', shape: 'none' },
    { value: 'notExists', label: 'is not set', shape: 'none' },
  ],
  boolean: [
    { value: 'equals', label: 'is', shape: 'scalar' },
    { value: 'notEquals', label: 'is not', shape: 'scalar' },
    { value: 'exists', label: 'is set', shape: 'none' },
    { value: 'notExists', label: 'is not set', shape: 'none' },
  ],
  date: [
    { value: 'equals', label: 'is on', shape: 'scalar' },
    { value: 'greaterThan', label: 'is after', shape: 'scalar' },
    { value: 'lessThan', label: 'is before', shape: 'scalar' },
    { value: 'within', label: 'is within the last', shape: 'duration' },
    { value: 'olderThan', label: 'is more than … ago', shape: 'duration' },
    { value: 'exists', label: 'is set', shape: 'none' },
    { value: 'notExists', label: 'is not set', shape: 'none' },
  ],
  activity: [
    { value: 'triggered', label: 'happened', shape: 'none' },
    { value: 'notTriggered', label: 'never happened', shape: 'none' },
    { value: 'triggeredWithin', label: 'happened within the last', shape: 'duration' },
    { value: 'notTriggeredWithin', label: 'did not happen in the last', shape: 'duration' },
    { value: 'triggeredOlderThan', label: 'last happened more than … ago', shape: 'duration' },
    { value: 'countAtLeast', label: 'happened at least', shape: 'count' },
  ],
  segment: [
    { value: 'memberOf', label: 'is a member', shape: 'none' },
    { value: 'notMemberOf', label: 'is not a member', shape: 'none' },
  ],
};

/** `loaded`: the contact fields' types are known (until then every data.* field looks like text). */
export type FieldCatalog = { kindOf: (field: string) => Kind; loaded: boolean; options: { group: string; items: { value: string; label: string }[] }[] };

/** Loads what a filter can name, once per builder. */
export function useFieldCatalog(excludeSegmentId?: string): { catalog: FieldCatalog; isPending: boolean } {
  const projectId = useProjectId();
  const fields = useQuery({
    queryKey: [projectId, 'contact-fields'],
    queryFn: () => herald.contacts.fields(),
  });
  const events = useQuery({
    queryKey: [projectId, 'event-names'],
    queryFn: () => herald.events.names(),
  });
  const segments = useQuery({ queryKey: [projectId, 'segments'], queryFn: () => herald.segments.list() });
  const kindOf = kindByType(new Map((fields.data?.fields ?? []).map((f) => [f.field, f.type])));
  const eventNames = (events.data?.names ?? []).map((n) => n.name).filter((n) => typeof n === 'string' && !n.startsWith('email.'));
  const catalog: FieldCatalog = {
    kindOf,
    loaded: fields.isSuccess,
    options: [
      {
        group: 'Contact',
        items: (fields.data?.fields ?? [{ field: 'email', type: 'string' as const, isCustom: false }]).map((f) => ({
          value: f.field,
          label: `${f.field} (${f.type})`,
        })),
      },
      { group: 'Events', items: eventNames.map((n) => ({ value: `event.${n}`, label: `event: ${n}` })) },
      { group: 'Email activity', items: EMAIL_ACTIVITIES.map((a) => ({ value: `email.${a}`, label: `email ${a}` })) },
      {
        group: 'Segments',
        items: (segments.data ?? []).filter((s) => s.id !== excludeSegmentId).map((s) => ({ value: `segment.${s.id}`, label: `in segment: ${s.name}` })),
      },
    ].filter((g) => g.items.length > 0),
  };
  return { catalog, isPending: fields.isPending };
}

export const emptyFilter = (): Filter => ({ field: 'email', operator: 'contains', value: '' });
export const emptyCondition = (): Condition => ({ logic: 'AND', groups: [{ filters: [emptyFilter()] }] });

function shapeOf(kind: Kind, operator: string): Shape {
  return OPERATORS[kind].find((o) => o.value === operator)?.shape ?? 'scalar';
}

/** A fresh filter for a newly chosen field: its kind's first operator and an empty value of the right shape. */
function filterFor(field: string, kind: Kind): Filter {
  const op = OPERATORS[kind][0];
  return withOperator({ field, operator: op.value }, kind, op.value);
}

function withOperator(f: Filter, kind: Kind, operator: string): Filter {
  const shape = shapeOf(kind, operator);
  const base: Filter = { field: f.field, operator };
  switch (shape) {
    case 'none':
      return base;
    case 'list':
      return { ...base, value: [] };
    case 'duration':
      return { ...base, value: 7, unit: 'days' };
    case 'count':
      return { ...base, value: 1 };
    case 'scalar':
      return { ...base, value: kind === 'boolean' ? true : kind === 'number' ? 0 : '' };
  }
}

export function ConditionBuilder({ value, onChange, catalog }: { value: Condition; onChange: (c: Condition) => void; catalog: FieldCatalog }) {
  return <Tree value={value} onChange={onChange} catalog={catalog} depth={0} path="Condition" />;
}

function Tree({
  value,
  onChange,
  catalog,
  depth,
  path,
  onRemove,
}: {
  value: Condition;
  onChange: (c: Condition) => void;
  catalog: FieldCatalog;
  depth: number;
  path: string;
  onRemove?: () => void;
}) {
  const setGroup = (i: number, g: Group) => onChange({ ...value, groups: value.groups.map((x, j) => (j === i ? g : x)) });
  const removeGroup = (i: number) => onChange({ ...value, groups: value.groups.filter((_, j) => j !== i) });
  return (
    <Stack gap="sm" data-testid={depth === 0 ? 'condition-root' : 'condition-nested'}>
      <Group gap="sm">
        <Text size="sm">Contacts matching</Text>
        <SegmentedControl
          size="xs"
          aria-label={`${path}: match`}
          value={value.logic}
          onChange={(v) => onChange({ ...value, logic: v as Logic })}
          data={[
            { value: 'AND', label: 'all groups' },
            { value: 'OR', label: 'any group' },
          ]}
        />
        {onRemove && (
          <Button size="compact-xs" variant="subtle" color="red" onClick={onRemove}>
            Remove nested groups
          </Button>
        )}
      </Group>
      {value.groups.map((g, i) => (
        <div key={i}>
          {i > 0 && (
            <Text size="xs" fw={700} c="indigo" mb={4}>
              {value.logic}
            </Text>
          )}
          <GroupCard
            value={g}
            onChange={(ng) => setGroup(i, ng)}
            onRemove={value.groups.length > 1 ? () => removeGroup(i) : undefined}
            catalog={catalog}
            depth={depth}
            label={`${path}, group ${i + 1}`}
          />
        </div>
      ))}
      <Group>
        <Button size="xs" variant="light" onClick={() => onChange({ ...value, groups: [...value.groups, { filters: [emptyFilter()] }] })}>
          {depth === 0 ? 'Add group' : 'Add nested group'}
        </Button>
      </Group>
    </Stack>
  );
}

function GroupCard({
  value,
  onChange,
  onRemove,
  catalog,
  depth,
  label,
}: {
  value: Group;
  onChange: (g: Group) => void;
  onRemove?: () => void;
  catalog: FieldCatalog;
  depth: number;
  label: string;
}) {
  const setFilter = (i: number, f: Filter) => onChange({ ...value, filters: value.filters.map((x, j) => (j === i ? f : x)) });
  const removeFilter = (i: number) => onChange({ ...value, filters: value.filters.filter((_, j) => j !== i) });
  return (
    <Card withBorder p="sm" role="group" aria-label={label} data-testid="condition-group">
      <Stack gap="xs">
        <Group justify="space-between">
          <Text size="sm" fw={600}>
            {label.replace(/^Condition, /, '')} — all of these
          </Text>
          {onRemove && (
            <Button size="compact-xs" variant="subtle" color="red" onClick={onRemove} aria-label={`Remove group (${label})`}>
              Remove group
            </Button>
          )}
        </Group>
        {value.filters.map((f, i) => (
          <FilterRow
            key={i}
            value={f}
            onChange={(nf) => setFilter(i, nf)}
            onRemove={value.filters.length > 1 || value.conditions ? () => removeFilter(i) : undefined}
            catalog={catalog}
            label={`${label}, filter ${i + 1}`}
          />
        ))}
        {value.conditions && (
          <Card withBorder p="sm" bg="var(--mantine-color-gray-0)">
            <Tree
              value={value.conditions}
              onChange={(c) => onChange({ ...value, conditions: c })}
              onRemove={() => {
                const { conditions: _dropped, ...rest } = value;
                onChange(rest.filters.length > 0 ? rest : { filters: [emptyFilter()] });
              }}
              catalog={catalog}
              depth={depth + 1}
              path={`${label}, nested`}
            />
          </Card>
        )}
        <Group gap="xs">
          <Button size="compact-sm" variant="default" onClick={() => onChange({ ...value, filters: [...value.filters, emptyFilter()] })}>
            Add filter
          </Button>
          {!value.conditions && depth < MAX_DEPTH - 1 && (
            <Button size="compact-sm" variant="default" onClick={() => onChange({ ...value, conditions: emptyCondition() })}>
              Nest groups
            </Button>
          )}
        </Group>
      </Stack>
    </Card>
  );
}

function FilterRow({
  value,
  onChange,
  onRemove,
  catalog,
  label,
}: {
  value: Filter;
  onChange: (f: Filter) => void;
  onRemove?: () => void;
  catalog: FieldCatalog;
  label: string;
}) {
  const kind = catalog.kindOf(value.field);
  const shape = shapeOf(kind, value.operator);
  const known = catalog.options.some((g) => g.items.some((i) => i.value === value.field));
  const fieldData = known ? catalog.options : [...catalog.options, { group: 'Other', items: [{ value: value.field, label: value.field }] }];
  return (
    <Group gap="xs" align="flex-end" wrap="wrap" data-testid="condition-filter">
      <Select
        aria-label={`${label}: field`}
        size="xs"
        w={220}
        searchable
        allowDeselect={false}
        data={fieldData}
        value={value.field}
        onChange={(f) => f && onChange(filterFor(f, catalog.kindOf(f)))}
      />
      <Select
        aria-label={`${label}: operator`}
        size="xs"
        w={200}
        allowDeselect={false}
        data={OPERATORS[kind].map((o) => ({ value: o.value, label: o.label }))}
        value={value.operator}
        onChange={(op) => op && onChange(withOperator(value, kind, op))}
      />
      <ValueInput value={value} onChange={onChange} kind={kind} shape={shape} label={label} suggest={catalog.loaded} />
      {onRemove && (
        <ActionIcon variant="subtle" color="red" aria-label={`Remove ${label}`} onClick={onRemove}>
          ×
        </ActionIcon>
      )}
    </Group>
  );
}

/** Values seen for a custom text field (GET /contacts/fields/:field/values), offered as suggestions. */
function useSeenValues(field: string, enabled: boolean): string[] {
  const projectId = useProjectId();
  const seen = useQuery({
    queryKey: [projectId, 'field-values', field],
    queryFn: () => herald.contacts.fieldValues(field, { limit: 50 }),
    enabled,
    staleTime: 60_000,
  });
  return [...new Set((seen.data?.values ?? []).filter((v) => v !== null && v !== '').map(String))];
}

/** A plain decimal: what a number filter's list keeps (`0x10` or `1e400` would become 16 or Infinity). */
const isDecimal = (v: string) => /^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(v.trim()) && Number.isFinite(Number(v));

function ValueInput({
  value,
  onChange,
  kind,
  shape,
  label,
  suggest,
}: {
  value: Filter;
  onChange: (f: Filter) => void;
  kind: Kind;
  shape: Shape;
  label: string;
  suggest: boolean;
}) {
  const aria = `${label}: value`;
  // Only for text fields, known to be text: before the catalogue loads, a number or boolean
  // data.* field looks like text, and asking for its values spent the project's request budget.
  const suggestions = useSeenValues(value.field, suggest && kind === 'string' && value.field.startsWith('data.') && (shape === 'scalar' || shape === 'list'));
  // Entries a number list refused, said under it rather than dropped without a word.
  const [refused, setRefused] = useState<string[]>([]);
  const unitSelect = (
    <Select
      aria-label={`${label}: unit`}
      size="xs"
      w={110}
      allowDeselect={false}
      data={UNITS}
      value={value.unit ?? 'days'}
      onChange={(u) => u && onChange({ ...value, unit: u as Unit })}
    />
  );
  switch (shape) {
    case 'none':
      return null;
    case 'list':
      return (
        <TagsInput
          aria-label={aria}
          size="xs"
          w={260}
          placeholder="Type a value, press Enter"
          maxTags={1000}
          data={kind === 'string' ? suggestions : []}
          value={Array.isArray(value.value) ? value.value.map(String) : []}
          error={refused.length > 0 ? `Not a number: ${refused.join(', ')}` : undefined}
          onChange={(vs) => {
            if (kind !== 'number') return onChange({ ...value, value: vs });
            setRefused(vs.filter((v) => !isDecimal(v)));
            onChange({ ...value, value: vs.filter(isDecimal).map(Number) });
          }}
        />
      );
    case 'duration':
      return (
        <>
          <NumberInput aria-label={aria} size="xs" w={90} min={1} value={Number(value.value) || 0} onChange={(n) => onChange({ ...value, value: Number(n) })} />
          {unitSelect}
        </>
      );
    case 'count': {
      const v = value.value;
      const count = typeof v === 'object' && v !== null ? Number((v as { count: unknown }).count) : Number(v);
      const within = typeof v === 'object' && v !== null ? Number((v as { within: unknown }).within) : null;
      const set = (c: number, w: number | null) =>
        onChange(
          w
            ? { field: value.field, operator: value.operator, value: { count: c, within: w }, unit: value.unit ?? 'days' }
            : { field: value.field, operator: value.operator, value: c },
        );
      return (
        <>
          <NumberInput aria-label={aria} size="xs" w={80} min={1} value={count || 1} onChange={(n) => set(Number(n) || 1, within)} />
          <Text size="xs">times, in the last</Text>
          <NumberInput
            aria-label={`${label}: window`}
            size="xs"
            w={80}
            min={1}
            placeholder="ever"
            value={within ?? ''}
            onChange={(n) => set(count || 1, n === '' ? null : Number(n))}
          />
          {within ? unitSelect : null}
        </>
      );
    }
    case 'scalar':
      if (kind === 'boolean') {
        return (
          <Select
            aria-label={aria}
            size="xs"
            w={100}
            allowDeselect={false}
            data={['true', 'false']}
            value={String(value.value === true)}
            onChange={(b) => onChange({ ...value, value: b === 'true' })}
          />
        );
      }
      if (kind === 'number') {
        return (
          <NumberInput
            aria-label={aria}
            size="xs"
            w={140}
            value={typeof value.value === 'number' ? value.value : 0}
            onChange={(n) => onChange({ ...value, value: Number(n) })}
          />
        );
      }
      if (kind === 'date') {
        return (
          <TextInput
            aria-label={aria}
            size="xs"
            w={160}
            type="date"
            value={String(value.value ?? '')}
            onChange={(e) => onChange({ ...value, value: e.currentTarget.value })}
          />
        );
      }
      return (
        <Autocomplete
          aria-label={aria}
          size="xs"
          w={220}
          maxLength={1000}
          data={suggestions}
          value={String(value.value ?? '')}
          onChange={(v) => onChange({ ...value, value: v })}
        />
      );
  }
}

/** The builder with its own field catalogue, for forms that hold a condition (a campaign's filtered audience). */
export function ConditionEditor({ value, onChange, error }: { value: Condition; onChange: (c: Condition) => void; error?: ReactNode }) {
  const { catalog } = useFieldCatalog();
  return (
    <Card withBorder p="sm">
      <ConditionBuilder value={value} onChange={onChange} catalog={catalog} />
      {error && (
        <Text size="sm" c="red" mt="xs" role="alert" data-testid="condition-error">
          {error}
        </Text>
      )}
    </Card>
  );
}

/** Loads a stored tree into the builder's shape (a missing logic means AND; a group needs filters). */
export function toBuilderTree(raw: unknown): Condition {
  if (!raw || typeof raw !== 'object') return emptyCondition();
  const c = raw as { logic?: unknown; groups?: unknown };
  const groups = Array.isArray(c.groups) ? c.groups : [];
  return {
    logic: c.logic === 'OR' ? 'OR' : 'AND',
    groups: groups.map((g: { filters?: unknown; conditions?: unknown }) => ({
      filters: Array.isArray(g.filters) ? (g.filters as Filter[]) : [],
      ...(g.conditions ? { conditions: toBuilderTree(g.conditions) } : {}),
    })),
  };
}
