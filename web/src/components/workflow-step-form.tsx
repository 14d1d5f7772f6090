import { Autocomplete, Card, Group, Modal, NumberInput, SegmentedControl, Select, Stack, Text, Textarea, TextInput } from '@mantine/core';
import { useForm } from '@mantine/form';
import { useMutation, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { fieldErrors, herald } from '../api.ts';
import { useFittingPageSize, useProjectId } from '../hooks.ts';
import { type Condition, ConditionBuilder, emptyCondition, toBuilderTree } from './ConditionBuilder.tsx';
import { useUnsavedChangesGuard } from './UnsavedChanges.tsx';
import { useWorkflowFieldCatalog } from './workflow-condition.tsx';
import { useDiscardConfirm } from './workflow-discard.tsx';
import { FormActions, useEventNames } from './workflow-settings.tsx';
import { BRANCH_LABELS, insertStep, type Slot, type Step, STEP_LABELS, STEP_TYPES, type StepType } from './workflow-graph.ts';

/** The form of one step (add at a slot, or change one): its fields per type, the API's answer on the fields it names. */

type Unit = 'minutes' | 'hours' | 'days';
const UNITS: Unit[] = ['minutes', 'hours', 'days'];
// A wait's timeout is seconds in the API: with seconds among its units any value shows as it is.
type TimeoutUnit = 'seconds' | Unit;
const TIMEOUT_UNITS: TimeoutUnit[] = ['seconds', ...UNITS];
const UNIT_SECONDS: Record<TimeoutUnit, number> = { seconds: 1, minutes: 60, hours: 3600, days: 86_400 };

type Values = {
  type: StepType;
  name: string;
  templateId: string | null;
  recipientType: 'CONTACT' | 'CUSTOM';
  recipientEmail: string;
  amount: number | string;
  unit: Unit;
  condition: Condition;
  eventName: string;
  timeoutAmount: number | string;
  timeoutUnit: TimeoutUnit;
  method: string;
  url: string;
  headers: string;
  body: string;
  data: string;
  subscribed: 'keep' | 'subscribe' | 'unsubscribe';
  reason: string;
};

const str = (v: unknown) => (typeof v === 'string' ? v : '');

function toValues(type: StepType, step?: Step): Values {
  const c = (step?.config ?? {}) as Record<string, unknown>;
  const recipient = (c.recipient ?? {}) as { type?: string; email?: string };
  const timeout = typeof c.timeout === 'number' ? c.timeout : null;
  const timeoutUnit =
    timeout === null
      ? 'hours'
      : (TIMEOUT_UNITS.slice()
          .reverse()
          .find((u) => timeout % UNIT_SECONDS[u] === 0) ?? 'seconds');
  return {
    type,
    name: step?.name ?? '',
    templateId: str(c.templateId) || null,
    recipientType: recipient.type === 'CUSTOM' ? 'CUSTOM' : 'CONTACT',
    recipientEmail: str(recipient.email),
    amount: typeof c.amount === 'number' ? c.amount : 1,
    unit: UNITS.includes(c.unit as Unit) ? (c.unit as Unit) : 'days',
    condition: type === 'CONDITION' && step ? toBuilderTree(c) : emptyCondition(),
    eventName: str(c.eventName),
    timeoutAmount: timeout === null ? '' : timeout / UNIT_SECONDS[timeoutUnit],
    timeoutUnit,
    method: str(c.method) || 'POST',
    url: str(c.url),
    headers: Object.entries((c.headers ?? {}) as Record<string, string>)
      .map(([k, v]) => `${k}: ${v}`)
      .join('\n'),
    body: c.body === undefined ? '' : JSON.stringify(c.body, null, 2),
    data: c.data === undefined ? '' : JSON.stringify(c.data, null, 2),
    subscribed: c.subscribed === true ? 'subscribe' : c.subscribed === false ? 'unsubscribe' : 'keep',
    reason: str(c.reason),
  };
}

/** A field the browser cannot turn into JSON, reported on that field before anything is sent. */
class LocalFieldError extends Error {
  readonly field: keyof Values;
  constructor(field: keyof Values, message: string) {
    super(message);
    this.field = field;
  }
}

function json(field: keyof Values, text: string): unknown {
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new LocalFieldError(field, 'not valid JSON');
  }
}

function toConfig(v: Values): unknown {
  const num = (x: number | string) => (x === '' ? undefined : Number(x));
  switch (v.type) {
    case 'SEND_EMAIL':
      return { templateId: v.templateId ?? '', recipient: v.recipientType === 'CUSTOM' ? { type: 'CUSTOM', email: v.recipientEmail } : { type: 'CONTACT' } };
    case 'DELAY':
      return { amount: num(v.amount), unit: v.unit };
    case 'CONDITION':
      return v.condition;
    case 'WAIT_FOR_EVENT': {
      const t = num(v.timeoutAmount);
      return { eventName: v.eventName, ...(t === undefined ? {} : { timeout: t * UNIT_SECONDS[v.timeoutUnit] }) };
    }
    case 'WEBHOOK': {
      const headers: Record<string, string> = {};
      for (const line of v.headers.split('\n').filter((l) => l.trim() !== '')) {
        const at = line.indexOf(':');
        if (at < 1) throw new LocalFieldError('headers', `"${line.trim()}": write each header as Name: value`);
        headers[line.slice(0, at).trim()] = line.slice(at + 1).trim();
      }
      const body = json('body', v.body);
      return { url: v.url, method: v.method, ...(Object.keys(headers).length ? { headers } : {}), ...(body === undefined ? {} : { body }) };
    }
    case 'UPDATE_CONTACT': {
      const data = json('data', v.data);
      return {
        ...(data === undefined ? {} : { data }),
        ...(v.subscribed === 'keep' ? {} : { subscribed: v.subscribed === 'subscribe' }),
      };
    }
    case 'EXIT':
      return v.reason.trim() ? { reason: v.reason } : {};
  }
}

/** The form field an API error names (`config.recipient.email` → recipientEmail); null when none fits. */
function fieldOf(type: StepType, path: string): keyof Values | null {
  if (path === 'name') return 'name';
  if (!path.startsWith('config')) return null;
  if (type === 'CONDITION') return 'condition';
  if (type === 'UPDATE_CONTACT' && path === 'config') return 'data';
  const key = path.split('.')[1] ?? '';
  const map: Record<string, keyof Values> = {
    templateId: 'templateId',
    recipient: path.startsWith('config.recipient.email') ? 'recipientEmail' : 'recipientType',
    amount: 'amount',
    unit: 'unit',
    eventName: 'eventName',
    timeout: 'timeoutAmount',
    url: 'url',
    method: 'method',
    headers: 'headers',
    body: 'body',
    data: 'data',
    subscribed: 'subscribed',
    reason: 'reason',
  };
  return map[key] ?? null;
}

export type StepTarget = { mode: 'add'; slot: Slot; after: string } | { mode: 'edit'; step: Step };

export function StepFormModal({
  workflowId,
  target,
  onClose,
  onSaved,
}: {
  workflowId: string;
  target: StepTarget | null;
  onClose: () => void;
  onSaved: () => void;
}) {
  const title =
    target?.mode === 'edit'
      ? `Edit ${target.step.name ?? STEP_LABELS[target.step.type] ?? target.step.type}`
      : target
        ? `Add a step ${target.slot.branch ? `on the ${BRANCH_LABELS[target.slot.branch].toLowerCase()} branch of` : 'after'} ${target.after}`
        : '';
  const discard = useDiscardConfirm(onClose, "Discard this step's changes?");
  return (
    <>
      <Modal opened={target !== null} onClose={discard.requestClose} title={title} size="xl">
        {target && (
          <StepForm
            key={target.mode === 'edit' ? target.step.id : `${target.slot.fromStepId}:${target.slot.branch}`}
            workflowId={workflowId}
            target={target}
            onSaved={onSaved}
            onCancel={onClose}
            isDirty={discard.isDirty}
          />
        )}
      </Modal>
      {discard.dialog}
    </>
  );
}

function StepForm({
  workflowId,
  target,
  onSaved,
  onCancel,
  isDirty,
}: {
  workflowId: string;
  target: StepTarget;
  onSaved: () => void;
  onCancel: () => void;
  isDirty: { current: () => boolean };
}) {
  const projectId = useProjectId();
  const editing = target.mode === 'edit' ? target.step : undefined;
  const form = useForm<Values>({ mode: 'controlled', initialValues: toValues((editing?.type as StepType | undefined) ?? 'SEND_EMAIL', editing) });
  isDirty.current = () => form.isDirty();
  useUnsavedChangesGuard(() => form.isDirty());
  const [problem, setProblem] = useState<string | null>(null);
  const catalog = useWorkflowFieldCatalog(workflowId);
  const eventNames = useEventNames();
  const [pickerSize, fitPickerSize] = useFittingPageSize(100);
  const templates = useQuery({
    queryKey: [projectId, 'templates', { picker: true, pickerSize }],
    queryFn: () => herald.templates.list({ pageSize: pickerSize, sort: 'updatedAt' }),
  });
  fitPickerSize(templates.error);
  const templateOptions = (templates.data?.data ?? []).map((t) => ({ value: t.id, label: t.name }));
  if (form.values.templateId && !templateOptions.some((o) => o.value === form.values.templateId)) {
    templateOptions.push({ value: form.values.templateId, label: 'Current template' });
  }
  // Between two steps, a step the path cannot go on from (EXIT) has no place.
  const types = STEP_TYPES.filter((t) => !(target.mode === 'add' && target.slot.before && t === 'EXIT'));

  const save = useMutation({
    mutationFn: async (v: Values) => {
      if (v.type === 'SEND_EMAIL' && !v.templateId) throw new LocalFieldError('templateId', 'Choose a template');
      const body = { name: v.name.trim() || null, config: toConfig(v) };
      if (target.mode === 'edit') await herald.workflows.updateStep(workflowId, target.step.id, body);
      else await insertStep(workflowId, target.slot, { type: v.type, ...body });
    },
    onMutate: () => setProblem(null),
    onSuccess: onSaved,
    onError: (err) => {
      if (err instanceof LocalFieldError) {
        form.setFieldError(err.field, err.message);
        return;
      }
      const errors = fieldErrors(err);
      let placed = 0;
      for (const e of errors) {
        const field = fieldOf(form.values.type, e.field);
        if (field) {
          form.setFieldError(field, e.message);
          placed += 1;
        }
      }
      if (placed < errors.length || errors.length === 0) setProblem(err instanceof Error ? err.message : 'Something went wrong');
    },
  });

  const v = form.values;
  return (
    <form onSubmit={form.onSubmit((values) => save.mutate(values))} noValidate>
      <Stack gap="sm">
        {target.mode === 'add' && (
          <Select
            label="Step type"
            allowDeselect={false}
            data={types.map((t) => ({ value: t, label: STEP_LABELS[t] }))}
            {...form.getInputProps('type')}
            onChange={(t) => t && form.setValues({ ...toValues(t as StepType), name: v.name })}
          />
        )}
        <TextInput label="Name (optional)" maxLength={200} {...form.getInputProps('name')} />
        {v.type === 'SEND_EMAIL' && (
          <>
            <Select
              label="Template"
              placeholder={templates.isPending ? 'Loading templates…' : 'Choose a template'}
              searchable
              nothingFoundMessage="No template matches"
              data={templateOptions}
              {...form.getInputProps('templateId')}
            />
            <SegmentedControl
              aria-label="Recipient"
              data={[
                { value: 'CONTACT', label: 'The contact' },
                { value: 'CUSTOM', label: 'A fixed address' },
              ]}
              value={v.recipientType}
              onChange={(t) => form.setFieldValue('recipientType', t === 'CUSTOM' ? 'CUSTOM' : 'CONTACT')}
            />
            {form.errors.recipientType && (
              <Text size="sm" c="red" role="alert">
                {form.errors.recipientType}
              </Text>
            )}
            {v.recipientType === 'CUSTOM' && <TextInput label="Recipient address" type="email" {...form.getInputProps('recipientEmail')} />}
          </>
        )}
        {v.type === 'DELAY' && (
          <Group align="flex-start" grow>
            <NumberInput label="Wait" min={1} clampBehavior="none" allowDecimal={false} {...form.getInputProps('amount')} />
            <Select label="Unit" allowDeselect={false} data={UNITS} {...form.getInputProps('unit')} />
          </Group>
        )}
        {v.type === 'CONDITION' && (
          <Card withBorder p="sm">
            <Text size="sm" mb="xs" c="dimmed">
              Contacts who match go down the Yes branch, the others down the No branch.
            </Text>
            <ConditionBuilder value={v.condition} onChange={(c) => form.setFieldValue('condition', c)} catalog={catalog} />
            {form.errors.condition && (
              <Text size="sm" c="red" mt="xs" role="alert">
                {form.errors.condition}
              </Text>
            )}
          </Card>
        )}
        {v.type === 'WAIT_FOR_EVENT' && (
          <>
            <Autocomplete label="Event to wait for" data={eventNames} maxLength={200} {...form.getInputProps('eventName')} />
            <Group align="flex-start" grow>
              <NumberInput label="Give up after (optional)" min={1} clampBehavior="none" allowDecimal={false} {...form.getInputProps('timeoutAmount')} />
              <Select label="Timeout unit" allowDeselect={false} data={TIMEOUT_UNITS} {...form.getInputProps('timeoutUnit')} />
            </Group>
          </>
        )}
        {v.type === 'WEBHOOK' && (
          <>
            <Group align="flex-start" wrap="wrap">
              <Select label="Method" w={120} allowDeselect={false} data={['POST', 'PUT', 'PATCH', 'DELETE', 'GET']} {...form.getInputProps('method')} />
              <TextInput label="URL" placeholder="https://example.com/hooks/herald" style={{ flex: 1, minWidth: 220 }} {...form.getInputProps('url')} />
            </Group>
            <Textarea label="Headers (optional, one per line)" placeholder="X-Source: herald" autosize minRows={2} {...form.getInputProps('headers')} />
            <Textarea
              label="Body (optional JSON)"
              description="Without a body, Herald posts the workflow, execution, step, contact and event."
              placeholder='{"email": "{{email}}"}'
              autosize
              minRows={3}
              styles={{ input: { fontFamily: 'monospace' } }}
              {...form.getInputProps('body')}
            />
          </>
        )}
        {v.type === 'UPDATE_CONTACT' && (
          <>
            <Textarea
              label="Set data (JSON object)"
              placeholder='{"stage": "onboarded"}'
              autosize
              minRows={3}
              styles={{ input: { fontFamily: 'monospace' } }}
              {...form.getInputProps('data')}
            />
            <Select
              label="Subscription"
              allowDeselect={false}
              data={[
                { value: 'keep', label: 'Leave as it is' },
                { value: 'subscribe', label: 'Subscribe' },
                { value: 'unsubscribe', label: 'Unsubscribe' },
              ]}
              {...form.getInputProps('subscribed')}
            />
          </>
        )}
        {v.type === 'EXIT' && <TextInput label="Reason (optional)" maxLength={500} {...form.getInputProps('reason')} />}
        <FormActions problem={problem} onCancel={onCancel} saving={save.isPending} submit={target.mode === 'edit' ? 'Save step' : 'Add step'} />
      </Stack>
    </form>
  );
}
