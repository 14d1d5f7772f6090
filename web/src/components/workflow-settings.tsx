import { Alert, Autocomplete, Button, Checkbox, Group, Modal, Stack, TextInput } from '@mantine/core';
import { useForm } from '@mantine/form';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useNavigate } from 'react-router';
import { fieldErrors, herald } from '../api.ts';
import { useProjectId } from '../hooks.ts';
import { notifySuccess, showApiError } from './forms.ts';
import { useUnsavedChangesGuard } from './UnsavedChanges.tsx';
import { useDiscardConfirm } from './workflow-discard.tsx';
import type { WorkflowDetail } from './workflow-graph.ts';

/** A workflow's name and trigger (the API's one trigger type: a tracked or emitted event), to create or change. */

/** The project's tracked event names (GET /events/names), for trigger and wait fields. */
export function useEventNames(): string[] {
  const projectId = useProjectId();
  const events = useQuery({ queryKey: [projectId, 'event-names'], queryFn: () => herald.events.names() });
  return [...new Set((events.data?.names ?? []).map((n) => n.name))];
}

type Values = { name: string; eventName: string; allowReentry: boolean };

function SettingsFields({ form }: { form: ReturnType<typeof useForm<Values>> }) {
  const eventNames = useEventNames();
  return (
    <>
      <TextInput label="Name" required maxLength={200} data-autofocus {...form.getInputProps('name')} />
      <Autocomplete
        label="Trigger event"
        description="The workflow starts when a contact tracks this event (or Herald emits it, e.g. contact.subscribed)."
        required
        maxLength={200}
        data={eventNames}
        {...form.getInputProps('eventName')}
      />
      <Checkbox label="A contact can enter again after finishing" {...form.getInputProps('allowReentry', { type: 'checkbox' })} />
    </>
  );
}

export function NewWorkflowButton() {
  const projectId = useProjectId();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const [opened, setOpened] = useState(false);
  const form = useForm<Values>({ mode: 'controlled', initialValues: { name: '', eventName: '', allowReentry: false } });
  const create = useMutation({
    mutationFn: (v: Values) => herald.workflows.create({ name: v.name, eventName: v.eventName, allowReentry: v.allowReentry }),
    onSuccess: (w) => {
      void queryClient.invalidateQueries({ queryKey: [projectId, 'workflows'] });
      notifySuccess(`${w.name} created (disabled)`);
      navigate(`/p/${projectId}/workflows/${w.id}/edit`);
    },
    onError: (err) => showApiError(err, form),
  });
  return (
    <>
      <Button onClick={() => setOpened(true)}>New workflow</Button>
      <Modal opened={opened} onClose={() => setOpened(false)} title="New workflow">
        <form onSubmit={form.onSubmit((v) => create.mutate(v))} noValidate>
          <Stack gap="sm">
            <SettingsFields form={form} />
            <FormActions onCancel={() => setOpened(false)} saving={create.isPending} submit="Create workflow" />
          </Stack>
        </form>
      </Modal>
    </>
  );
}

export function TriggerModal({ workflow, opened, onClose, onSaved }: { workflow: WorkflowDetail; opened: boolean; onClose: () => void; onSaved: () => void }) {
  const discard = useDiscardConfirm(onClose, 'Discard the changes to the trigger?');
  return (
    <>
      <Modal opened={opened} onClose={discard.requestClose} title="Name and trigger">
        {opened && <TriggerForm workflow={workflow} onClose={onClose} onSaved={onSaved} isDirty={discard.isDirty} />}
      </Modal>
      {discard.dialog}
    </>
  );
}

function TriggerForm({
  workflow,
  onClose,
  onSaved,
  isDirty,
}: {
  workflow: WorkflowDetail;
  onClose: () => void;
  onSaved: () => void;
  isDirty: { current: () => boolean };
}) {
  const form = useForm<Values>({
    mode: 'controlled',
    initialValues: { name: workflow.name, eventName: workflow.eventName, allowReentry: workflow.allowReentry },
  });
  isDirty.current = () => form.isDirty();
  useUnsavedChangesGuard(() => form.isDirty());
  const [problem, setProblem] = useState<string | null>(null);
  const save = useMutation({
    mutationFn: (v: Values) => herald.workflows.update(workflow.id, v),
    onMutate: () => setProblem(null),
    onSuccess: onSaved,
    onError: (err) => {
      const errors = fieldErrors(err);
      const unplaced = errors.filter((e) => !(e.field in form.values));
      for (const e of errors) if (e.field in form.values) form.setFieldError(e.field, e.message);
      if (unplaced.length > 0 || errors.length === 0) setProblem(err instanceof Error ? err.message : 'Something went wrong');
    },
  });
  return (
    <form onSubmit={form.onSubmit((v) => save.mutate(v))} noValidate>
      <Stack gap="sm">
        <SettingsFields form={form} />
        <FormActions problem={problem} onCancel={onClose} saving={save.isPending} submit="Save" />
      </Stack>
    </form>
  );
}

/** A workflow form's last row: why it was not saved (when no field holds it), Cancel, and its submit button. */
export function FormActions({ problem, onCancel, saving, submit }: { problem?: string | null; onCancel: () => void; saving: boolean; submit: string }) {
  return (
    <>
      {problem && (
        <Alert color="red" role="alert" title="Not saved">
          {problem}
        </Alert>
      )}
      <Group justify="flex-end">
        <Button variant="default" onClick={onCancel}>
          Cancel
        </Button>
        <Button type="submit" loading={saving}>
          {submit}
        </Button>
      </Group>
    </>
  );
}
