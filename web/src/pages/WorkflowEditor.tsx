import { Alert, Anchor, Badge, Box, Button, Card, Group, List, Modal, Stack, Switch, Text, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type ReactNode, useState } from 'react';
import { Link, useParams } from 'react-router';
import { fieldErrors, herald } from '../api.ts';
import { notifySuccess, showApiError } from '../components/forms.ts';
import { Loading, PageError } from '../components/states.tsx';
import { StepFormModal, type StepTarget } from '../components/workflow-step-form.tsx';
import { TriggerModal } from '../components/workflow-settings.tsx';
import {
  BRANCH_LABELS,
  type Slot,
  type Step,
  STEP_LABELS,
  type Transition,
  type WorkflowDetail,
  removeStep,
  slotsOf,
  unreachable,
} from '../components/workflow-graph.ts';
import { useProjectId } from '../hooks.ts';
import { stepSummary } from './Workflows.tsx';

/**
 * The workflow editor: the graph as a vertical flow from its trigger, a condition's branches side
 * by side (stacked on a narrow screen). Every change is the API's calls, then the workflow is
 * fetched again: what the page shows is what the API holds.
 */

const stepLabel = (s: Step) => s.name ?? STEP_LABELS[s.type] ?? s.type;

/** What the editor's cards say under a step's type, beyond the read-only page's summaries. */
function summary(step: Step, templateName: Map<string, string>): string {
  const c = step.config;
  if (step.type === 'SEND_EMAIL' && typeof c.templateId === 'string') {
    const to =
      (c.recipient as { type?: string; email?: string } | undefined)?.type === 'CUSTOM' ? ` to ${String((c.recipient as { email?: string }).email)}` : '';
    return `${templateName.get(c.templateId) ?? 'its template'}${to}`;
  }
  if (step.type === 'WEBHOOK') return `${String(c.method ?? 'POST')} ${String(c.url ?? '')}`;
  if (step.type === 'UPDATE_CONTACT') {
    const parts = [];
    if (c.data && typeof c.data === 'object') parts.push(`sets ${Object.keys(c.data).join(', ')}`);
    if (typeof c.subscribed === 'boolean') parts.push(c.subscribed ? 'subscribes' : 'unsubscribes');
    return parts.join('; ');
  }
  if (step.type === 'EXIT') return typeof c.reason === 'string' ? c.reason : 'ends the workflow';
  return stepSummary(step);
}

/** Which slot shows a step's card: the first one met going down the flow (a step reached twice is linked the second time). */
function placements(trigger: Step, steps: Map<string, Step>, transitions: Transition[]): Map<string, string> {
  const owner = new Map<string, string>();
  const walk = (step: Step) => {
    for (const slot of slotsOf(step, transitions)) {
      const next = slot.before ? steps.get(slot.before.toStepId) : undefined;
      if (next && !owner.has(next.id)) {
        owner.set(next.id, slotKey(slot));
        walk(next);
      }
    }
  };
  walk(trigger);
  return owner;
}

const slotKey = (slot: Slot) => `${slot.fromStepId}:${slot.branch ?? ''}`;

type FlowProps = {
  steps: Map<string, Step>;
  transitions: Transition[];
  owner: Map<string, string>;
  templateName: Map<string, string>;
  problems: Set<string>;
  onAdd: (slot: Slot, after: string) => void;
  onEdit: (step: Step) => void;
  onRemove: (step: Step) => void;
};

function Connector() {
  return <Box aria-hidden w={2} h={16} mx="auto" bg="gray.4" />;
}

function AddButton({ label, onClick }: { label: string; onClick: () => void }) {
  return (
    <Group justify="center">
      <Button size="compact-sm" variant="light" aria-label={label} onClick={onClick}>
        + Add step
      </Button>
    </Group>
  );
}

function StepCard({ step, flow, text, children }: { step: Step; flow: FlowProps; text?: ReactNode; children?: ReactNode }) {
  const problem = flow.problems.has(step.id);
  return (
    <Card
      withBorder
      padding="sm"
      data-testid="workflow-step"
      data-step-type={step.type}
      style={problem ? { borderColor: 'var(--mantine-color-red-6)' } : undefined}
    >
      {/* The buttons wrap under the text when the card is too narrow for both on one line. */}
      <Group justify="space-between" wrap="wrap" align="flex-start" gap="xs">
        <div style={{ minWidth: 0, flex: '1 1 12rem' }}>
          <Group gap="xs" wrap="wrap">
            <Badge variant="light">{STEP_LABELS[step.type] ?? step.type}</Badge>
            {step.name && (
              <Text size="sm" fw={500}>
                {step.name}
              </Text>
            )}
          </Group>
          <Text size="sm" c="dimmed" mt={4} style={{ overflowWrap: 'anywhere' }}>
            {text ?? summary(step, flow.templateName)}
          </Text>
        </div>
        <Group gap={4} wrap="nowrap" ml="auto">
          {children ?? (
            <>
              <Button size="compact-xs" variant="subtle" aria-label={`Edit ${stepLabel(step)}`} onClick={() => flow.onEdit(step)}>
                Edit
              </Button>
              <Button size="compact-xs" variant="subtle" color="red" aria-label={`Remove ${stepLabel(step)}`} onClick={() => flow.onRemove(step)}>
                Remove
              </Button>
            </>
          )}
        </Group>
      </Group>
    </Card>
  );
}

/** The steps from `slot` on: its add button, then the next step and what follows it. */
function SlotFlow({ slot, from, flow }: { slot: Slot; from: Step; flow: FlowProps }) {
  const next = slot.before ? flow.steps.get(slot.before.toStepId) : undefined;
  const where = slot.branch ? `on the ${BRANCH_LABELS[slot.branch].toLowerCase()} branch of ${stepLabel(from)}` : `after ${stepLabel(from)}`;
  return (
    <Stack gap={0}>
      <Connector />
      <AddButton label={`Add step ${where}`} onClick={() => flow.onAdd(slot, stepLabel(from))} />
      {next &&
        (flow.owner.get(next.id) === slotKey(slot) ? (
          <>
            <Connector />
            <StepFlow step={next} flow={flow} />
          </>
        ) : (
          <Text size="sm" c="dimmed" ta="center" mt="xs">
            then continues at {stepLabel(next)}
          </Text>
        ))}
    </Stack>
  );
}

/** The narrowest a branch column gets; deeper nesting than fits scrolls the flow sideways. */
const BRANCH_MIN_WIDTH = 280;

function StepFlow({ step, flow }: { step: Step; flow: FlowProps }) {
  const slots = slotsOf(step, flow.transitions);
  return (
    <Stack gap={0}>
      <StepCard step={step} flow={flow} />
      {slots.length === 1 && <SlotFlow slot={slots[0]} from={step} flow={flow} />}
      {slots.length > 1 && (
        // Side by side while each branch has BRANCH_MIN_WIDTH, stacked below that (by the space the
        // branches have, not the viewport's: nested branches have less).
        <Group gap="sm" mt="xs" align="flex-start" wrap="wrap">
          {slots.map((slot) => (
            <Box
              key={slotKey(slot)}
              style={{ flex: `1 1 ${BRANCH_MIN_WIDTH}px`, minWidth: BRANCH_MIN_WIDTH, borderLeft: '2px solid var(--mantine-color-gray-4)' }}
              role="group"
              aria-label={`${BRANCH_LABELS[slot.branch!]} branch of ${stepLabel(step)}`}
              data-testid={`branch-${slot.branch}`}
              pl="sm"
            >
              <Badge variant="outline" color={slot.branch === 'no' || slot.branch === 'timeout' ? 'gray' : 'teal.9'}>
                {BRANCH_LABELS[slot.branch!]}
              </Badge>
              <SlotFlow slot={slot} from={step} flow={flow} />
            </Box>
          ))}
        </Group>
      )}
    </Stack>
  );
}

/** The step ids an enable refusal names (`errors[].field` is `steps.<id>`) and its messages. */
function enableProblems(err: unknown): { ids: Set<string>; messages: string[]; title: string } {
  const body = fieldErrors(err);
  return {
    ids: new Set(body.map((e) => e.field.replace(/^steps\./, ''))),
    messages: body.map((e) => e.message),
    title: err instanceof Error ? err.message : 'The workflow cannot be enabled',
  };
}

export function WorkflowEditorPage() {
  const projectId = useProjectId();
  const { workflowId = '' } = useParams();
  const queryClient = useQueryClient();
  const workflow = useQuery({ queryKey: [projectId, 'workflows', workflowId], queryFn: () => herald.workflows.get(workflowId) });
  const templates = useQuery({
    queryKey: [projectId, 'templates', { picker: true, pickerSize: 100 }],
    queryFn: () => herald.templates.list({ pageSize: 100, sort: 'updatedAt' }),
  });
  const [target, setTarget] = useState<StepTarget | null>(null);
  const [removing, setRemoving] = useState<Step | null>(null);
  const [editingTrigger, setEditingTrigger] = useState(false);
  const [refusal, setRefusal] = useState<ReturnType<typeof enableProblems> | null>(null);
  const refetch = () => queryClient.invalidateQueries({ queryKey: [projectId, 'workflows'] });

  const toggle = useMutation({
    mutationFn: (enabled: boolean) => herald.workflows.update(workflowId, { enabled }),
    onMutate: () => setRefusal(null),
    onSuccess: (w) => notifySuccess(`${w.name} ${w.enabled ? 'enabled' : 'disabled'}`),
    onError: (err) => setRefusal(enableProblems(err)),
    onSettled: refetch,
  });
  const remove = useMutation({
    mutationFn: (step: Step) => removeStep(workflowId, step.id),
    onSuccess: () => notifySuccess('Step removed'),
    onError: (err) => showApiError(err),
    onSettled: () => {
      setRemoving(null);
      void refetch();
    },
  });

  if (workflow.isPending) return <Loading />;
  if (workflow.error) return <PageError error={workflow.error} onRetry={() => void workflow.refetch()} />;
  const w: WorkflowDetail = workflow.data;
  const trigger = w.steps.find((s) => s.type === 'TRIGGER');
  const steps = new Map(w.steps.map((s) => [s.id, s]));
  const flow: FlowProps = {
    steps,
    transitions: w.transitions,
    owner: trigger ? placements(trigger, steps, w.transitions) : new Map(),
    templateName: new Map((templates.data?.data ?? []).map((t) => [t.id, t.name])),
    problems: refusal?.ids ?? new Set(),
    onAdd: (slot, after) => setTarget({ mode: 'add', slot, after }),
    onEdit: (step) => setTarget({ mode: 'edit', step }),
    onRemove: setRemoving,
  };
  const loose = unreachable(w.steps, w.transitions);

  return (
    <Stack>
      <div>
        <Anchor component={Link} to={`/p/${projectId}/workflows/${w.id}`} size="sm">
          ← {w.name}: steps and executions
        </Anchor>
        <Group justify="space-between" wrap="wrap">
          <Title order={2}>Edit {w.name}</Title>
          <Switch label="Enabled" checked={w.enabled} disabled={toggle.isPending} onChange={(e) => toggle.mutate(e.currentTarget.checked)} />
        </Group>
      </div>
      {refusal && (
        <Alert color="red" role="alert" title={refusal.title} withCloseButton closeButtonLabel="Dismiss" onClose={() => setRefusal(null)}>
          {refusal.messages.length > 1 && (
            <List size="sm">
              {refusal.messages.map((m, i) => (
                <List.Item key={i}>{m}</List.Item>
              ))}
            </List>
          )}
        </Alert>
      )}
      {w.enabled && (
        <Text size="sm" c="dimmed">
          This workflow is enabled: a change applies to contacts as they reach the changed place.
        </Text>
      )}
      <Box maw={880} w="100%" mx="auto" style={{ overflowX: 'auto' }} data-testid="workflow-flow">
        {trigger && (
          <Stack gap={0}>
            <StepCard
              step={trigger}
              flow={flow}
              text={
                <>
                  When a contact triggers{' '}
                  <Text span ff="monospace" inherit>
                    {w.eventName}
                  </Text>
                  {w.allowReentry ? ', every time' : ', once per contact'}
                </>
              }
            >
              <Button size="compact-xs" variant="subtle" onClick={() => setEditingTrigger(true)}>
                Edit trigger
              </Button>
            </StepCard>
            <SlotFlow slot={slotsOf(trigger, w.transitions)[0]} from={trigger} flow={flow} />
          </Stack>
        )}
      </Box>
      {loose.length > 0 && (
        <Card withBorder padding="md">
          <Title order={3} size="h5" mb="xs">
            Not reached from the trigger
          </Title>
          <Stack gap="xs">
            {loose.map((s) => (
              <StepCard key={s.id} step={s} flow={flow} />
            ))}
          </Stack>
        </Card>
      )}
      <StepFormModal
        workflowId={w.id}
        target={target}
        onClose={() => setTarget(null)}
        onSaved={() => {
          notifySuccess(target?.mode === 'edit' ? 'Step saved' : 'Step added');
          setTarget(null);
          setRefusal(null);
          void refetch();
        }}
      />
      <TriggerModal
        workflow={w}
        opened={editingTrigger}
        onClose={() => setEditingTrigger(false)}
        onSaved={() => {
          setEditingTrigger(false);
          notifySuccess('Trigger saved');
          void refetch();
        }}
      />
      <Modal opened={removing !== null} onClose={() => setRemoving(null)} title={`Remove ${removing ? stepLabel(removing) : ''}?`}>
        <Stack>
          <Text size="sm">
            The steps before it then lead to the step after it. A condition or wait can be removed once at most one of its branches has steps.
          </Text>
          <Group justify="flex-end">
            <Button variant="default" onClick={() => setRemoving(null)}>
              Keep it
            </Button>
            <Button color="red" loading={remove.isPending} onClick={() => removing && remove.mutate(removing)}>
              Remove step
            </Button>
          </Group>
        </Stack>
      </Modal>
    </Stack>
  );
}
