import { Anchor, Badge, Button, Card, Group, Modal, Pagination, Stack, Switch, Table, Text, TextInput, Title, Tooltip } from '@mantine/core';
import { useInfiniteQuery, useMutation, useQueries, useQuery, useQueryClient } from '@tanstack/react-query';
import { Link, useParams, useSearchParams } from 'react-router';
import { useState } from 'react';
import { herald, isApiError } from '../api.ts';
import { notifySuccess, showApiError } from '../components/forms.ts';
import { Empty, LoadMore, Loading, PageError, PageHeader } from '../components/states.tsx';
import { detailState } from '../components/DetailState.tsx';
import { StatusSelect, useUrlChoice } from '../components/StatusSelect.tsx';
import { NewWorkflowButton } from '../components/workflow-settings.tsx';
import { cursorPaging, formatDate, formatNumber, useProjectId } from '../hooks.ts';
import type { Answer } from '../types.ts';

/** Workflows, read-mostly: the list with enable/disable, one workflow's graph with per-step counts, its executions. Building graphs is the API's (and a later page's) job. */

type WorkflowDetail = Answer<'workflows.get'>;
type Step = WorkflowDetail['steps'][number];
type Transition = WorkflowDetail['transitions'][number];
type ExecutionStatus = Answer<'workflows.listExecutions'>['data'][number]['status'];

const STATUS_COLORS: Record<string, string> = {
  RUNNING: 'blue',
  WAITING: 'yellow',
  COMPLETED: 'green',
  EXITED: 'gray',
  FAILED: 'red',
  CANCELLED: 'gray',
};
const EXECUTION_STATUSES: ExecutionStatus[] = ['RUNNING', 'WAITING', 'COMPLETED', 'EXITED', 'FAILED', 'CANCELLED'];

const ADD_STEPS_IN_EDITOR = "Add its steps in the workflow's editor: Edit, on the workflow's page.";

function useToggleWorkflow(projectId: string) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (w: { id: string; enabled: boolean }) => herald.workflows.update(w.id, { enabled: w.enabled }),
    onSuccess: (w) => {
      void queryClient.invalidateQueries({ queryKey: [projectId, 'workflows'] });
      notifySuccess(`${w.name} ${w.enabled ? 'enabled' : 'disabled'}`);
    },
    // A graph that cannot run names a step to fix, which the dashboard cannot edit.
    onError: (err) => showApiError(err, undefined, isApiError(err, 400) && err.details?.stepId ? ADD_STEPS_IN_EDITOR : undefined),
  });
}

export function WorkflowsPage() {
  const projectId = useProjectId();
  const [params, setParams] = useSearchParams();
  const page = Math.max(1, Number(params.get('page')) || 1);
  const search = params.get('search') ?? '';
  const setParam = (key: string, value: string) => {
    const next = new URLSearchParams(params);
    if (value) next.set(key, value);
    else next.delete(key);
    if (key !== 'page') next.delete('page');
    setParams(next, { replace: true });
  };
  const list = useQuery({
    queryKey: [projectId, 'workflows', 'list', { page, search }],
    queryFn: () => herald.workflows.list({ page, pageSize: 25, search: search || undefined }),
  });
  const toggle = useToggleWorkflow(projectId);

  return (
    <>
      <PageHeader title="Workflows">
        <NewWorkflowButton />
      </PageHeader>
      <TextInput
        label="Search"
        placeholder="Name, description or trigger event"
        defaultValue={search}
        onChange={(e) => setParam('search', e.currentTarget.value)}
        maw={420}
        mb="md"
      />
      {list.isPending ? (
        <Loading />
      ) : list.error ? (
        <PageError error={list.error} onRetry={() => void list.refetch()} />
      ) : list.data.data.length === 0 ? (
        <Empty title={search ? 'No workflow matches' : 'No workflows yet'}>
          Create one with New workflow and build its steps in the editor (or with the API: POST /workflows, then its steps and transitions).
        </Empty>
      ) : (
        <>
          <Table.ScrollContainer minWidth={560}>
            <Table striped>
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Name</Table.Th>
                  <Table.Th>Trigger event</Table.Th>
                  <Table.Th>Updated</Table.Th>
                  <Table.Th>Enabled</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {list.data.data.map((w) => (
                  <Table.Tr key={w.id}>
                    <Table.Td>
                      <Anchor component={Link} to={`/p/${projectId}/workflows/${w.id}`}>
                        {w.name}
                      </Anchor>
                    </Table.Td>
                    <Table.Td>
                      <Text ff="monospace" size="sm">
                        {w.eventName}
                      </Text>
                    </Table.Td>
                    <Table.Td>{formatDate(w.updatedAt)}</Table.Td>
                    <Table.Td>
                      <Switch
                        aria-label={`Enable ${w.name}`}
                        checked={w.enabled}
                        disabled={toggle.isPending}
                        onChange={(e) => toggle.mutate({ id: w.id, enabled: e.currentTarget.checked })}
                      />
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
          {list.data.totalPages > 1 && <Pagination mt="md" total={list.data.totalPages} value={page} onChange={(p) => setParam('page', String(p))} />}
        </>
      )}
    </>
  );
}

/** Steps in the order a contact meets them (breadth-first from the trigger), then any step the trigger cannot reach. */
function orderSteps(steps: Step[], transitions: Transition[]): Step[] {
  const trigger = steps.find((s) => s.type === 'TRIGGER');
  const byId = new Map(steps.map((s) => [s.id, s]));
  const seen = new Set<string>();
  const queue = trigger ? [trigger.id] : [];
  const ordered: Step[] = [];
  while (queue.length > 0) {
    const id = queue.shift()!;
    if (seen.has(id) || !byId.has(id)) continue;
    seen.add(id);
    ordered.push(byId.get(id)!);
    for (const t of transitions) if (t.fromStepId === id) queue.push(t.toStepId);
  }
  return [...ordered, ...steps.filter((s) => !seen.has(s.id))];
}

/** "1 day", "3 days" (the units are plural words: seconds, minutes, hours, days). */
function quantity(n: unknown, unit: unknown): string {
  const u = String(unit ?? '');
  return `${String(n ?? '')} ${n === 1 ? u.replace(/s$/, '') : u}`.trim();
}

/** A timeout in seconds, in its largest whole unit: 86400 is "1 day", 90 is "90 seconds". */
function seconds(s: number): string {
  const units: [number, string][] = [
    [86_400, 'days'],
    [3_600, 'hours'],
    [60, 'minutes'],
  ];
  const [size, unit] = units.find(([size]) => s % size === 0) ?? [1, 'seconds'];
  return quantity(s / size, unit);
}

type Tree = { logic?: string; groups?: { filters?: { field: string; operator: string; value?: unknown; unit?: string }[]; conditions?: Tree }[] };

/** A condition tree on one line: "data.activated equals true", "(a and b) or c". */
function conditionSummary(tree: Tree): string {
  const groups = (tree.groups ?? []).map((g) => {
    const parts = (g.filters ?? []).map((f) => {
      const value = Array.isArray(f.value) ? f.value.join(', ') : f.value === undefined || f.value === null ? '' : String(f.value);
      return [f.field, f.operator, value, f.unit ?? ''].filter(Boolean).join(' ');
    });
    if (g.conditions) parts.push(`(${conditionSummary(g.conditions)})`);
    return parts.join(' and ');
  });
  return groups.length > 1 ? groups.map((g) => (g.includes(' and ') ? `(${g})` : g)).join(` ${(tree.logic ?? 'AND').toLowerCase()} `) : (groups[0] ?? '');
}

export function stepSummary(step: Step): string {
  const c = step.config;
  switch (step.type) {
    case 'TRIGGER':
      return 'Entry';
    case 'SEND_EMAIL':
      return c.templateId ? '' : 'no template yet';
    case 'CONDITION':
      return conditionSummary(c as Tree);
    case 'DELAY':
      return quantity(c.amount ?? c.duration, c.unit);
    case 'WAIT_FOR_EVENT':
      return `${String(c.eventName ?? '')}${typeof c.timeout === 'number' ? `, for at most ${seconds(c.timeout)}` : ''}`;
    case 'WEBHOOK':
      return String(c.url ?? '');
    default:
      return '';
  }
}

export function WorkflowPage() {
  const projectId = useProjectId();
  const { workflowId = '' } = useParams();
  const [status, setStatus] = useUrlChoice('status', EXECUTION_STATUSES);
  const queryClient = useQueryClient();
  const workflow = useQuery({
    queryKey: [projectId, 'workflows', workflowId],
    queryFn: () => herald.workflows.get(workflowId),
  });
  const executions = useInfiniteQuery({
    queryKey: [projectId, 'workflows', workflowId, 'executions', status],
    queryFn: ({ pageParam }) => herald.workflows.listExecutions(workflowId, { limit: 50, cursor: pageParam, status: status ?? undefined }),
    ...cursorPaging,
  });
  const toggle = useToggleWorkflow(projectId);
  // The templates its SEND_EMAIL steps send, by id: their names link to them.
  const templateIds = [...new Set((workflow.data?.steps ?? []).map((s) => s.config.templateId).filter((id) => typeof id === 'string'))];
  const templates = useQueries({
    queries: templateIds.map((id) => ({ queryKey: [projectId, 'template', id], queryFn: () => herald.templates.get(id) })),
  });
  const templateName = new Map(templates.flatMap((t) => (t.data ? [[t.data.id, t.data.name] as const] : [])));
  // The execution whose Cancel was clicked, until it is confirmed or kept.
  const [confirmCancel, setConfirmCancel] = useState<{ id: string; email: string | null } | null>(null);
  const cancel = useMutation({
    mutationFn: (executionId: string) => herald.workflows.cancelExecution(workflowId, executionId),
    onSuccess: () => {
      setConfirmCancel(null);
      void queryClient.invalidateQueries({ queryKey: [projectId, 'workflows', workflowId] });
      notifySuccess('Execution cancelled');
    },
    onError: (err) => {
      setConfirmCancel(null);
      showApiError(err);
    },
  });

  const state = detailState(workflow, projectId, 'workflows');
  if (state || !workflow.data) return state;
  const w = workflow.data;
  const steps = orderSteps(w.steps, w.transitions);
  const stepName = new Map(w.steps.map((s) => [s.id, s.name ?? s.type]));
  const items = executions.data?.pages.flatMap((p) => p.data) ?? [];

  return (
    <Stack>
      <div>
        <Anchor component={Link} to={`/p/${projectId}/workflows`} size="sm">
          ← Workflows
        </Anchor>
        <Group justify="space-between" wrap="wrap">
          <Title order={2}>{w.name}</Title>
          <Button component={Link} to={`/p/${projectId}/workflows/${w.id}/edit`} variant="light" ml="auto">
            Edit
          </Button>
          <Switch
            label="Enabled"
            checked={w.enabled}
            disabled={toggle.isPending}
            onChange={(e) => toggle.mutate({ id: w.id, enabled: e.currentTarget.checked })}
          />
        </Group>
      </div>
      <Text c="dimmed">
        Starts when a contact triggers{' '}
        <Text span ff="monospace">
          {w.eventName}
        </Text>
        {w.allowReentry ? ', every time' : ', once per contact'}. {formatNumber(w.activeExecutions)} in progress.
      </Text>
      <Card withBorder padding="lg">
        <Title order={3} size="h4" mb="sm">
          Steps
        </Title>
        <Table.ScrollContainer minWidth={640}>
          <Table data-testid="workflow-steps">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Step</Table.Th>
                <Table.Th>Then</Table.Th>
                <Table.Th ta="right">Entered</Table.Th>
                <Table.Th ta="right">Completed</Table.Th>
                <Table.Th ta="right">Waiting</Table.Th>
                <Table.Th ta="right">Failed</Table.Th>
                <Table.Th ta="right">
                  <Tooltip label="Passed without doing the step: an email not sent (unsubscribed or suppressed contact), or a wait ended by a cancel">
                    <span>Skipped</span>
                  </Tooltip>
                </Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {steps.map((s) => (
                <Table.Tr key={s.id}>
                  <Table.Td>
                    <Group gap="xs" wrap="nowrap">
                      <Badge variant="light" style={{ flexShrink: 0 }}>
                        {s.type}
                      </Badge>
                      <div>
                        <Text size="sm">{s.name ?? ''}</Text>
                        <Text size="xs" c="dimmed">
                          {typeof s.config.templateId === 'string' ? (
                            <Anchor component={Link} to={`/p/${projectId}/templates/${s.config.templateId}`} inherit>
                              {templateName.get(s.config.templateId) ?? 'its template'}
                            </Anchor>
                          ) : (
                            stepSummary(s)
                          )}
                        </Text>
                      </div>
                    </Group>
                  </Table.Td>
                  <Table.Td>
                    <Text size="sm">
                      {w.transitions
                        .filter((t) => t.fromStepId === s.id)
                        .map((t) => `${t.branch ? `${t.branch}: ` : ''}${stepName.get(t.toStepId) ?? '?'}`)
                        .join(', ') || '—'}
                    </Text>
                  </Table.Td>
                  <Table.Td ta="right">{formatNumber(s.counts.entered)}</Table.Td>
                  <Table.Td ta="right">{formatNumber(s.counts.completed)}</Table.Td>
                  <Table.Td ta="right">{formatNumber(s.counts.waiting)}</Table.Td>
                  <Table.Td ta="right">{formatNumber(s.counts.failed)}</Table.Td>
                  <Table.Td ta="right">{formatNumber(s.counts.skipped)}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      </Card>
      <Card withBorder padding="lg">
        <Group justify="space-between" mb="sm">
          <Title order={3} size="h4">
            Executions
          </Title>
          <StatusSelect label="Execution status" value={status} choices={EXECUTION_STATUSES} onChange={setStatus} />
        </Group>
        {executions.isPending ? (
          <Loading />
        ) : executions.error ? (
          <PageError error={executions.error} onRetry={() => void executions.refetch()} />
        ) : items.length === 0 ? (
          <Empty title="No executions">Contacts that trigger the workflow while it is enabled appear here.</Empty>
        ) : (
          <Table.ScrollContainer minWidth={640}>
            <Table data-testid="workflow-executions">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Contact</Table.Th>
                  <Table.Th>Status</Table.Th>
                  <Table.Th>At step</Table.Th>
                  <Table.Th>Started</Table.Th>
                  <Table.Th />
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {items.map((x) => (
                  <Table.Tr key={x.id}>
                    <Table.Td>
                      {x.contact ? (
                        <Anchor component={Link} to={`/p/${projectId}/contacts/${x.contact.id}`}>
                          {x.contact.email}
                        </Anchor>
                      ) : (
                        '—'
                      )}
                    </Table.Td>
                    <Table.Td>
                      <Badge color={STATUS_COLORS[x.status] ?? 'gray'} variant="light">
                        {x.status}
                      </Badge>
                      {(x.error ?? x.exitReason) && (
                        <Text size="xs" c="dimmed">
                          {x.error ?? x.exitReason}
                        </Text>
                      )}
                    </Table.Td>
                    <Table.Td>
                      {x.currentStepId ? (stepName.get(x.currentStepId) ?? '—') : '—'}
                      {x.dueAt && (
                        <Text size="xs" c="dimmed">
                          until {formatDate(x.dueAt)}
                        </Text>
                      )}
                    </Table.Td>
                    <Table.Td>{formatDate(x.startedAt)}</Table.Td>
                    <Table.Td>
                      {(x.status === 'RUNNING' || x.status === 'WAITING') && (
                        <Button size="xs" variant="light" color="red" onClick={() => setConfirmCancel({ id: x.id, email: x.contact?.email ?? null })}>
                          Cancel
                        </Button>
                      )}
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
        )}
        <LoadMore list={executions} />
      </Card>
      <Modal opened={confirmCancel !== null} onClose={() => setConfirmCancel(null)} title="Cancel this execution?">
        <Stack>
          <Text size="sm">
            {confirmCancel?.email ?? 'The contact'} leaves {w.name} now: its remaining steps are skipped, and the execution cannot be resumed.
          </Text>
          <Group justify="flex-end">
            <Button variant="default" onClick={() => setConfirmCancel(null)}>
              Keep it
            </Button>
            <Button color="red" loading={cancel.isPending} onClick={() => confirmCancel && cancel.mutate(confirmCancel.id)}>
              Cancel execution
            </Button>
          </Group>
        </Stack>
      </Modal>
    </Stack>
  );
}
