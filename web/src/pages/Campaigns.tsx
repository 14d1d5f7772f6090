import {
  Alert,
  Anchor,
  Badge,
  Box,
  Button,
  Card,
  Grid,
  Group,
  Modal,
  Pagination,
  Paper,
  Progress,
  SegmentedControl,
  Select,
  SimpleGrid,
  Stack,
  Table,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { useForm } from '@mantine/form';
import { useDisclosure } from '@mantine/hooks';
import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { lazy, Suspense, useState } from 'react';
import { Link, Navigate, useNavigate, useParams, useSearchParams } from 'react-router';
import { fieldErrors, herald, isApiError } from '../api.ts';
import { MessageFields, type MessageValues, messagePayload } from '../components/MessageFields.tsx';
import type { Condition } from '../components/ConditionBuilder.tsx';
import { LiveCount } from '../components/LiveCount.tsx';
import { LivePreview } from '../components/Preview.tsx';
import { useUnsavedChangesGuard } from '../components/UnsavedChanges.tsx';
import { EmailList } from '../components/EmailList.tsx';
import { useMe } from '../components/RequireUser.tsx';
import { notifySuccess, showApiError } from '../components/forms.ts';
import { Empty, Loading, PageError, PageHeader } from '../components/states.tsx';
import { formatDate, formatNumber, useFittingPageSize, useProjectId } from '../hooks.ts';
import { detailState } from '../components/DetailState.tsx';
import { CAMPAIGN_STATUSES, type Campaign, type CampaignStatus } from '../types.ts';

// The report's chart brings the charts library: loaded with it, not with the first page.
const CampaignActivity = lazy(() => import('../components/CampaignActivity.tsx'));

const STATUS_COLORS: Record<CampaignStatus, string> = {
  DRAFT: 'gray',
  SCHEDULED: 'blue',
  SENDING: 'yellow',
  SENT: 'green',
  CANCELLED: 'red',
};

export function CampaignStatusBadge({ status }: { status: CampaignStatus }) {
  return (
    <Badge color={STATUS_COLORS[status]} variant="light" data-testid="campaign-status">
      {status}
    </Badge>
  );
}

export function CampaignsPage() {
  const projectId = useProjectId();
  const [params, setParams] = useSearchParams();
  const page = Math.max(1, Number(params.get('page')) || 1);
  const status = params.get('status');
  const [pageSize, fitPageSize] = useFittingPageSize(20);
  const list = useQuery({
    queryKey: [projectId, 'campaigns', { page, pageSize, status }],
    queryFn: () => herald.campaigns.list({ page, pageSize, status: status ?? undefined }),
    placeholderData: keepPreviousData,
    // Read again while a listed campaign may change by itself (sending, or scheduled to start): as soon as the first of them would be.
    refetchInterval: (q) => {
      const soonest = Math.min(...(q.state.data?.data ?? []).map((c) => watchInterval(c) || Infinity));
      return soonest === Infinity ? false : soonest;
    },
  });
  fitPageSize(list.error);
  const setParam = (key: string, value: string | null) => {
    const next = new URLSearchParams(params);
    if (value) next.set(key, value);
    else next.delete(key);
    if (key !== 'page') next.delete('page');
    setParams(next, { replace: true });
  };
  return (
    <>
      <PageHeader title="Campaigns">
        <Button component={Link} to={`/p/${projectId}/campaigns/new`}>
          New campaign
        </Button>
      </PageHeader>
      <Select
        label="Status"
        placeholder="All statuses"
        clearable
        data={CAMPAIGN_STATUSES}
        value={status}
        onChange={(v) => setParam('status', v)}
        w={200}
        mb="md"
      />
      {list.isPending ? (
        <Loading />
      ) : list.error ? (
        <PageError error={list.error} onRetry={() => void list.refetch()} />
      ) : list.data.data.length === 0 ? (
        <Empty title={status ? `No ${status.toLowerCase()} campaigns` : 'No campaigns yet'}>
          A campaign sends one message to all your subscribed contacts or to a segment.
        </Empty>
      ) : (
        <>
          <Table.ScrollContainer minWidth={640}>
            <Table striped highlightOnHover>
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Name</Table.Th>
                  <Table.Th>Status</Table.Th>
                  <Table.Th>Recipients</Table.Th>
                  <Table.Th>Opened</Table.Th>
                  <Table.Th>Updated</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {list.data.data.map((c) => (
                  <Table.Tr key={c.id}>
                    <Table.Td>
                      <Anchor component={Link} to={`/p/${projectId}/campaigns/${c.id}${c.status === 'DRAFT' ? '' : '/report'}`}>
                        {c.name}
                      </Anchor>
                    </Table.Td>
                    <Table.Td>
                      <CampaignStatusBadge status={c.status} />
                    </Table.Td>
                    <Table.Td>{formatNumber(c.totalRecipients)}</Table.Td>
                    <Table.Td>{c.status === 'DRAFT' ? '—' : formatNumber(c.openedCount)}</Table.Td>
                    <Table.Td>{formatDate(c.updatedAt)}</Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
          {list.data.totalPages > 1 && (
            <Group justify="flex-end" mt="md">
              <Pagination total={list.data.totalPages} value={page} onChange={(p) => setParam('page', String(p))} />
            </Group>
          )}
        </>
      )}
    </>
  );
}

type ComposerValues = MessageValues & {
  audienceType: 'ALL' | 'SEGMENT' | 'FILTERED';
  segmentId: string | null;
  audienceCondition: Condition;
};

// The condition builder is loaded when a filtered audience is chosen, not with the first page.
const ConditionEditor = lazy(() => import('../components/ConditionBuilder.tsx').then((m) => ({ default: m.ConditionEditor })));
const START_CONDITION: Condition = { logic: 'AND', groups: [{ filters: [{ field: 'email', operator: 'contains', value: '' }] }] };

const EMPTY: ComposerValues = {
  name: '',
  subject: '',
  from: '',
  fromName: '',
  replyTo: '',
  type: 'MARKETING',
  body: '<p>Hi {{firstName ?? "there"}},</p>\n<p></p>',
  audienceType: 'ALL',
  segmentId: null,
  audienceCondition: START_CONDITION,
};

function toValues(c: Campaign): ComposerValues {
  return {
    name: c.name,
    subject: c.subject,
    from: c.from,
    fromName: c.fromName ?? '',
    replyTo: c.replyTo ?? '',
    type: c.type,
    body: c.body,
    audienceType: c.audienceType,
    segmentId: c.segmentId,
    audienceCondition: (c.audienceCondition as Condition | null) ?? START_CONDITION,
  };
}

export function NewCampaignPage() {
  return <Composer key="new" />;
}

export function CampaignPage() {
  const projectId = useProjectId();
  const { campaignId = '' } = useParams();
  const campaign = useQuery({
    queryKey: [projectId, 'campaign', campaignId],
    queryFn: () => herald.campaigns.get(campaignId),
  });
  const state = detailState(campaign, projectId, 'campaigns');
  if (state || !campaign.data) return state;
  if (campaign.data.status !== 'DRAFT') return <Navigate to={`/p/${projectId}/campaigns/${campaignId}/report`} replace />;
  return <Composer key={campaign.data.id} campaign={campaign.data} />;
}

function Composer({ campaign }: { campaign?: Campaign }) {
  const projectId = useProjectId();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const form = useForm<ComposerValues>({
    mode: 'controlled',
    initialValues: campaign ? toValues(campaign) : EMPTY,
    validate: { segmentId: (id, v) => (v.audienceType === 'SEGMENT' && !id ? 'Choose a segment' : null) },
  });
  useUnsavedChangesGuard(() => form.isDirty());
  const segments = useQuery({ queryKey: [projectId, 'segments'], queryFn: () => herald.segments.list() });
  const [pickerSize, fitPickerSize] = useFittingPageSize(50);
  const templates = useQuery({
    queryKey: [projectId, 'templates', { picker: true, pickerSize }],
    queryFn: () => herald.templates.list({ pageSize: pickerSize, sort: 'updatedAt' }),
  });
  fitPickerSize(templates.error);
  const save = useMutation({
    mutationFn: async (v: ComposerValues) => {
      const body = {
        ...messagePayload(v),
        audienceType: v.audienceType,
        segmentId: v.audienceType === 'SEGMENT' ? v.segmentId : null,
        audienceCondition: v.audienceType === 'FILTERED' ? v.audienceCondition : null,
      };
      if (campaign) return herald.campaigns.update(campaign.id, body);
      return (await herald.campaigns.create(body)).data;
    },
    onSuccess: (saved) => {
      queryClient.setQueryData([projectId, 'campaign', saved.id], saved);
      void queryClient.invalidateQueries({ queryKey: [projectId, 'campaigns'] });
      form.resetDirty();
      notifySuccess(campaign ? 'Campaign saved' : 'Draft created');
      if (!campaign) navigate(`/p/${projectId}/campaigns/${saved.id}`, { replace: true });
    },
    onError: (err, v) => {
      // The condition engine answers 400 naming the place of the first bad filter: shown under the builder.
      if (v.audienceType === 'FILTERED' && isApiError(err, 400) && fieldErrors(err).length === 0) {
        form.setFieldError('audienceCondition', err.message);
      } else showApiError(err, form);
    },
  });

  return (
    <Stack>
      <div>
        <Anchor component={Link} to={`/p/${projectId}/campaigns`} size="sm">
          ← Campaigns
        </Anchor>
        <Group gap="sm">
          <Title order={2}>{campaign ? campaign.name : 'New campaign'}</Title>
          {campaign && <CampaignStatusBadge status={campaign.status} />}
        </Group>
      </div>
      <Grid gap="lg">
        <Grid.Col span={{ base: 12, md: 6 }}>
          <form onSubmit={form.onSubmit((v) => save.mutate(v))} noValidate>
            <Stack gap="sm">
              {!campaign && (templates.data?.data.length ?? 0) > 0 && (
                <Select
                  label="Start from a template"
                  placeholder="Blank"
                  clearable
                  data={templates.data?.data.map((t) => ({ value: t.id, label: t.name })) ?? []}
                  onChange={(id) => {
                    const t = templates.data?.data.find((x) => x.id === id);
                    if (t) {
                      form.setValues({
                        subject: t.subject,
                        from: t.from,
                        fromName: t.fromName ?? '',
                        replyTo: t.replyTo ?? '',
                        type: t.type,
                        body: t.body,
                        name: form.values.name || t.name,
                      });
                    }
                  }}
                />
              )}
              <MessageFields form={form} />
              <Text fw={500} size="sm">
                Audience
              </Text>
              <SegmentedControl
                aria-label="Audience"
                data={[
                  { value: 'ALL', label: 'All subscribed contacts' },
                  { value: 'SEGMENT', label: 'A segment' },
                  { value: 'FILTERED', label: 'A filter' },
                ]}
                {...form.getInputProps('audienceType')}
              />
              {form.values.audienceType === 'SEGMENT' && (
                <Select
                  label="Segment"
                  placeholder={segments.isPending ? 'Loading…' : 'Choose a segment'}
                  data={(segments.data ?? []).map((s) => ({ value: s.id, label: `${s.name} (${formatNumber(s.memberCount)})` }))}
                  nothingFoundMessage="No segments yet"
                  {...form.getInputProps('segmentId')}
                />
              )}
              {form.values.audienceType === 'FILTERED' && (
                <Suspense fallback={<Loading label="Loading the condition builder…" />}>
                  <ConditionEditor
                    value={form.values.audienceCondition}
                    onChange={(c) => form.setFieldValue('audienceCondition', c)}
                    error={form.errors.audienceCondition}
                  />
                  <Group gap="xs" align="baseline" wrap="wrap">
                    <Text size="sm" c="dimmed">
                      Contacts matching now:
                    </Text>
                    <LiveCount condition={form.values.audienceCondition} fz="lg" />
                  </Group>
                  <Text size="xs" c="dimmed" mt={-8}>
                    Suppressed addresses, and for marketing unsubscribed contacts, are left out when it is sent.
                  </Text>
                </Suspense>
              )}
              <Group justify="flex-end">
                <Button type="submit" loading={save.isPending}>
                  {campaign ? 'Save draft' : 'Create draft'}
                </Button>
              </Group>
            </Stack>
          </form>
          {campaign && <SendPanel campaign={campaign} dirty={form.isDirty()} />}
        </Grid.Col>
        <Grid.Col span={{ base: 12, md: 6 }}>
          <LivePreview subject={form.values.subject} body={form.values.body} type={form.values.type} />
        </Grid.Col>
      </Grid>
    </Stack>
  );
}

/** A date as a datetime-local input's value in the user's time zone (`2026-05-04T09:30`). */
const localInputValue = (d: Date) => new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);

function SendPanel({ campaign, dirty }: { campaign: Campaign; dirty: boolean }) {
  const projectId = useProjectId();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const me = useMe();
  const [testTo, setTestTo] = useState(me.data?.email ?? '');
  const [confirm, setConfirm] = useState<null | 'now' | 'schedule'>(null);
  const [when, setWhen] = useState('');
  const test = useMutation({
    mutationFn: () => herald.campaigns.sendTest(campaign.id, { email: testTo }),
    onSuccess: () => notifySuccess(`Test email sent to ${testTo}`),
    onError: (err) => showApiError(err),
  });
  const send = useMutation({
    mutationFn: (scheduledFor: string | null) => herald.campaigns.send(campaign.id, { scheduledFor }),
    onSuccess: (res) => {
      void queryClient.invalidateQueries({ queryKey: [projectId] });
      notifySuccess(res.message);
      navigate(`/p/${projectId}/campaigns/${campaign.id}/report`);
    },
    onError: (err, scheduledFor) => {
      setConfirm(null);
      // The time passed while the confirmation was open: said on the field, in the user's time.
      if (scheduledFor && isApiError(err, 400) && err.details?.now) setPassedAt(scheduledFor);
      else showApiError(err);
    },
  });
  const [passedAt, setPassedAt] = useState<string | null>(null);
  const recipients = campaign.totalRecipients;
  const scheduledIso = when ? new Date(when).toISOString() : null;
  const passed = scheduledIso !== null && (scheduledIso === passedAt || Date.parse(scheduledIso) <= Date.now());
  return (
    <Card withBorder mt="lg">
      <Stack gap="sm">
        <Title order={3} size="h4">
          Test and send
        </Title>
        {dirty && (
          <Alert color="yellow" p="xs">
            Save the draft first: tests and sends use the saved version.
          </Alert>
        )}
        <Group align="flex-end" wrap="wrap">
          <TextInput label="Send a test to" value={testTo} onChange={(e) => setTestTo(e.currentTarget.value)} w={{ base: '100%', sm: 280 }} />
          <Button variant="light" onClick={() => test.mutate()} loading={test.isPending} disabled={dirty || !testTo}>
            Send test
          </Button>
        </Group>
        <Text size="sm">
          Audience: <b data-testid="recipient-count">{formatNumber(recipients)}</b> recipient{recipients === 1 ? '' : 's'} right now.
        </Text>
        <Group align="flex-end" wrap="wrap">
          <Button onClick={() => setConfirm('now')} disabled={dirty || recipients === 0}>
            Send now…
          </Button>
          <TextInput
            type="datetime-local"
            label="Or schedule for (your time zone)"
            min={localInputValue(new Date())}
            value={when}
            onChange={(e) => setWhen(e.currentTarget.value)}
            error={passed && `${new Date(when).toLocaleString()} has passed: choose a later time`}
          />
          <Button variant="default" onClick={() => setConfirm('schedule')} disabled={dirty || !when || passed}>
            Schedule…
          </Button>
        </Group>
      </Stack>
      <Modal opened={confirm !== null} onClose={() => setConfirm(null)} title={confirm === 'now' ? 'Send this campaign now?' : 'Schedule this campaign?'}>
        <Stack>
          <Text size="sm" data-testid="confirm-text">
            {confirm === 'now'
              ? `“${campaign.subject}” goes to ${formatNumber(recipients)} recipient${recipients === 1 ? '' : 's'} now. This cannot be undone.`
              : `“${campaign.subject}” goes to its audience (${formatNumber(recipients)} recipient${recipients === 1 ? '' : 's'} today) on ${when ? new Date(when).toLocaleString() : ''}.`}
          </Text>
          <Group justify="flex-end">
            <Button variant="default" onClick={() => setConfirm(null)}>
              Cancel
            </Button>
            <Button loading={send.isPending} onClick={() => send.mutate(confirm === 'now' ? null : scheduledIso)}>
              {confirm === 'now' ? `Send to ${formatNumber(recipients)}` : 'Schedule'}
            </Button>
          </Group>
        </Stack>
      </Modal>
    </Card>
  );
}

function Stat({ label, value, testId }: { label: string; value: string; testId?: string }) {
  return (
    <Paper withBorder p="md">
      <Text size="xs" c="dimmed" tt="uppercase" fw={600}>
        {label}
      </Text>
      <Text size="xl" fw={700} data-testid={testId}>
        {value}
      </Text>
    </Paper>
  );
}

const pct = (part: number, whole: number) => (whole > 0 ? Math.round((part / whole) * 1000) / 10 : 0);

/**
 * How often the report reads a campaign while it may still change by itself: every 2 s while
 * sending. A scheduled one is read again at its start, and every 30 s until then (its read
 * recounts the audience, a heavy read charged to the project: every 2 s, an open page spent the
 * project's heavy-read time on a large audience).
 */
function watchInterval(c: { status: string; scheduledFor: string | null } | undefined): number | false {
  if (c?.status === 'SENDING') return 2_000;
  if (c?.status !== 'SCHEDULED') return false;
  const untilStart = c.scheduledFor ? Date.parse(c.scheduledFor) - Date.now() : 0;
  return Math.min(30_000, Math.max(2_000, untilStart));
}

export function CampaignReportPage() {
  const projectId = useProjectId();
  const { campaignId = '' } = useParams();
  const queryClient = useQueryClient();
  const campaign = useQuery({
    queryKey: [projectId, 'campaign', campaignId],
    queryFn: () => herald.campaigns.get(campaignId),
    refetchInterval: (q) => watchInterval(q.state.data),
  });
  const stats = useQuery({
    queryKey: [projectId, 'campaign-stats', campaignId],
    queryFn: () => herald.campaigns.stats(campaignId),
    refetchInterval: () => (campaign.data && ['SENDING', 'SCHEDULED', 'SENT'].includes(campaign.data.status) ? 3000 : false),
  });
  const [confirmCancel, cancelModal] = useDisclosure(false);
  const cancel = useMutation({
    mutationFn: () => herald.campaigns.cancel(campaignId),
    onSuccess: (c) => {
      cancelModal.close();
      void queryClient.invalidateQueries({ queryKey: [projectId] });
      notifySuccess(c.status === 'DRAFT' ? 'Schedule cancelled: the campaign is a draft again' : 'Sending stopped: the queued emails were skipped');
    },
    onError: (err) => {
      cancelModal.close();
      showApiError(err);
    },
  });
  const state = detailState(campaign, projectId, 'campaigns');
  if (state || !campaign.data) return state;
  const c = campaign.data;
  const s = stats.data;
  return (
    <Stack>
      <div>
        <Anchor component={Link} to={`/p/${projectId}/campaigns`} size="sm">
          ← Campaigns
        </Anchor>
        <Group gap="sm" justify="space-between" wrap="wrap">
          <Group gap="sm">
            <Title order={2}>{c.name}</Title>
            <CampaignStatusBadge status={c.status} />
          </Group>
          <Group gap="xs">
            {c.status === 'DRAFT' && (
              <Button component={Link} to={`/p/${projectId}/campaigns/${c.id}`} variant="default" size="xs">
                Edit draft
              </Button>
            )}
            {(c.status === 'SCHEDULED' || c.status === 'SENDING') && (
              <Button color="red" variant="light" size="xs" onClick={cancelModal.open}>
                Cancel sending
              </Button>
            )}
          </Group>
        </Group>
        <Text size="sm" c="dimmed">
          “{c.subject}” from {c.fromName ? `${c.fromName} <${c.from}>` : c.from}
          {c.scheduledFor && c.status === 'SCHEDULED' ? ` · scheduled for ${formatDate(c.scheduledFor)}` : ''}
          {c.sentAt ? ` · sent ${formatDate(c.sentAt)}` : ''}
        </Text>
      </div>
      {stats.isPending ? (
        <Loading />
      ) : stats.error ? (
        <PageError error={stats.error} onRetry={() => void stats.refetch()} />
      ) : s ? (
        <>
          <SimpleGrid cols={{ base: 2, sm: 4 }}>
            <Stat label="Recipients" value={formatNumber(s.totalRecipients)} testId="stat-recipients" />
            <Stat label="Sent" value={formatNumber(s.sentCount)} testId="stat-sent" />
            <Stat label="Delivered" value={formatNumber(s.deliveredCount)} testId="stat-delivered" />
            <Stat label="Opened" value={formatNumber(s.openedCount)} testId="stat-opened" />
            <Stat label="Clicked" value={formatNumber(s.clickedCount)} testId="stat-clicked" />
            <Stat label="Bounced" value={formatNumber(s.bouncedCount)} testId="stat-bounced" />
            <Stat label="Complaints" value={formatNumber(s.complainedCount)} />
            <Stat label="Unsubscribed" value={formatNumber(s.unsubscribedCount)} />
          </SimpleGrid>
          <Card withBorder>
            <Title order={3} size="h4" mb="sm">
              Funnel
            </Title>
            <Stack gap="xs">
              {(
                [
                  ['Delivered', s.deliveredCount, 'teal'],
                  ['Opened', s.openedCount, 'indigo'],
                  ['Clicked', s.clickedCount, 'grape'],
                  ['Bounced', s.bouncedCount, 'red'],
                ] as const
              ).map(([label, n, color]) => (
                <div key={label}>
                  <Group justify="space-between">
                    <Text size="sm">{label}</Text>
                    <Text size="sm" c="dimmed">
                      {formatNumber(n)} · {pct(n, s.sentCount)}%
                    </Text>
                  </Group>
                  <Progress value={pct(n, s.sentCount)} color={color} aria-label={`${label} ${pct(n, s.sentCount)}%`} />
                </div>
              ))}
            </Stack>
          </Card>
          {c.sentAt && (
            // The charts' height held while they load, so the recipients below do not jump down under the pointer.
            <Box mih={312}>
              <Suspense fallback={<Loading />}>
                <CampaignActivity campaignId={c.id} sentAt={c.sentAt} statsVersion={JSON.stringify(s)} />
              </Suspense>
            </Box>
          )}
          {c.status !== 'DRAFT' && c.status !== 'SCHEDULED' && (
            <EmailList
              title="Recipients"
              param="recipients"
              campaignId={c.id}
              live={c.status === 'SENDING'}
              empty="Each recipient's email appears here as the campaign goes out."
            />
          )}
        </>
      ) : null}
      <Modal opened={confirmCancel} onClose={cancelModal.close} title={c.status === 'SCHEDULED' ? 'Cancel the scheduled send?' : 'Stop sending this campaign?'}>
        <Stack>
          <Text size="sm" data-testid="cancel-text">
            {c.status === 'SCHEDULED'
              ? `“${c.subject}” will not go out${c.scheduledFor ? ` on ${formatDate(c.scheduledFor)}` : ''}: the campaign goes back to draft, to edit and send or schedule again.`
              : 'The emails still queued for its recipients are skipped and cannot be resumed; those already sent stay sent.'}
          </Text>
          <Group justify="flex-end">
            <Button variant="default" onClick={cancelModal.close}>
              Keep it
            </Button>
            <Button color="red" loading={cancel.isPending} onClick={() => cancel.mutate()}>
              {c.status === 'SCHEDULED' ? 'Back to draft' : 'Stop sending'}
            </Button>
          </Group>
        </Stack>
      </Modal>
    </Stack>
  );
}
