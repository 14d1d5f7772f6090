import {
  Alert,
  Anchor,
  Badge,
  Button,
  Card,
  Grid,
  Group,
  Modal,
  Pagination,
  SegmentedControl,
  Stack,
  Switch,
  Table,
  Text,
  Textarea,
  TextInput,
  Title,
  VisuallyHidden,
} from '@mantine/core';
import { useForm } from '@mantine/form';
import { useDisclosure } from '@mantine/hooks';
import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useNavigate, useParams, useSearchParams } from 'react-router';
import { herald, isApiError } from '../api.ts';
import { type Condition, ConditionBuilder, emptyCondition, toBuilderTree, useFieldCatalog } from '../components/ConditionBuilder.tsx';
import { notifySuccess, showApiError } from '../components/forms.ts';
import { LiveCount } from '../components/LiveCount.tsx';
import { useChanged, useUnsavedChangesGuard } from '../components/UnsavedChanges.tsx';
import { Empty, Loading, PageError, PageHeader } from '../components/states.tsx';
import { formatDate, formatNumber, useFittingPageSize, useProjectId } from '../hooks.ts';
import { detailState } from '../components/DetailState.tsx';
import type { Segment } from '../types.ts';

/** Segments: the list, a segment's editor with the visual condition builder and live count, its members. */

export function SegmentsPage() {
  const projectId = useProjectId();
  const list = useQuery({ queryKey: [projectId, 'segments'], queryFn: () => herald.segments.list() });
  return (
    <>
      <PageHeader title="Segments">
        <Button component={Link} to={`/p/${projectId}/segments/new`}>
          New segment
        </Button>
      </PageHeader>
      {list.isPending ? (
        <Loading />
      ) : list.error ? (
        <PageError error={list.error} onRetry={() => void list.refetch()} />
      ) : list.data.length === 0 ? (
        <Empty title="No segments yet">
          A segment is a group of contacts: dynamic ones follow a condition on their data, events and email activity; static ones are a list you manage.
          Campaigns can go to a segment.
        </Empty>
      ) : (
        <Table.ScrollContainer minWidth={560}>
          <Table striped highlightOnHover>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Name</Table.Th>
                <Table.Th>Type</Table.Th>
                <Table.Th>Members</Table.Th>
                <Table.Th>Tracked</Table.Th>
                <Table.Th>Updated</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {list.data.map((s) => (
                <Table.Tr key={s.id}>
                  <Table.Td>
                    <Anchor component={Link} to={`/p/${projectId}/segments/${s.id}`}>
                      {s.name}
                    </Anchor>
                  </Table.Td>
                  <Table.Td>
                    <Badge variant="light" color={s.type === 'DYNAMIC' ? 'indigo' : 'gray'}>
                      {s.type.toLowerCase()}
                    </Badge>
                  </Table.Td>
                  <Table.Td>{formatNumber(s.memberCount)}</Table.Td>
                  <Table.Td>{s.trackMembership ? 'yes' : 'no'}</Table.Td>
                  <Table.Td>{formatDate(s.updatedAt)}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
    </>
  );
}

export function SegmentEditorPage() {
  const projectId = useProjectId();
  const { segmentId } = useParams();
  const segment = useQuery({
    queryKey: [projectId, 'segment', segmentId],
    queryFn: () => herald.segments.get(segmentId ?? ''),
    enabled: Boolean(segmentId),
  });
  const state = segmentId ? detailState(segment, projectId, 'segments') : null;
  if (state) return state;
  return <SegmentEditor key={segment.data?.id ?? 'new'} segment={segment.data ?? null} />;
}

function SegmentEditor({ segment }: { segment: Segment | null }) {
  const projectId = useProjectId();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const [confirmDelete, deleteModal] = useDisclosure(false);
  const form = useForm({
    mode: 'controlled',
    initialValues: {
      name: segment?.name ?? '',
      description: segment?.description ?? '',
      type: segment?.type ?? ('DYNAMIC' as 'DYNAMIC' | 'STATIC'),
      trackMembership: segment?.trackMembership ?? false,
    },
    validate: { name: (v) => (v.trim() ? null : 'Name the segment') },
  });
  const [condition, setCondition] = useState<Condition>(() => (segment?.condition ? toBuilderTree(segment.condition) : emptyCondition()));
  const [conditionError, setConditionError] = useState<string | null>(null);
  const conditionChanges = useChanged(condition);
  useUnsavedChangesGuard(() => form.isDirty() || (form.getValues().type === 'DYNAMIC' && conditionChanges.changed()));
  const dynamic = form.values.type === 'DYNAMIC';
  const { catalog } = useFieldCatalog(segment?.id);

  const save = useMutation({
    mutationFn: (v: typeof form.values) => {
      const body = {
        name: v.name,
        description: v.description || null,
        trackMembership: v.trackMembership,
        ...(v.type === 'DYNAMIC' ? { condition } : {}),
      };
      return segment ? herald.segments.update(segment.id, body) : herald.segments.create({ ...body, type: v.type });
    },
    onSuccess: (saved) => {
      setConditionError(null);
      void queryClient.invalidateQueries({ queryKey: [projectId, 'segments'] });
      void queryClient.invalidateQueries({ queryKey: [projectId, 'segment-members', saved.id] });
      queryClient.setQueryData([projectId, 'segment', saved.id], saved);
      notifySuccess(segment ? 'Segment saved' : 'Segment created');
      form.resetDirty();
      conditionChanges.reset();
      if (!segment) navigate(`/p/${projectId}/segments/${saved.id}`, { replace: true });
    },
    onError: (err) => {
      // The condition engine answers 400 with the place of the bad filter in details.path (a
      // reference cycle too); the rest goes on the form's fields or in a toast.
      if (isApiError(err, 400) && (typeof err.details?.path === 'string' || /condition|filter|operator|cycle/i.test(err.message)))
        setConditionError(err.message);
      else showApiError(err, form);
    },
  });
  // A tracked segment's membership as saved, computed now rather than by the next 5-minute run.
  const compute = useMutation({
    mutationFn: () => herald.segments.compute(segment?.id ?? ''),
    onSuccess: (r) => {
      void queryClient.invalidateQueries({ queryKey: [projectId, 'segments'] });
      void queryClient.invalidateQueries({ queryKey: [projectId, 'segment', segment?.id] });
      void queryClient.invalidateQueries({ queryKey: [projectId, 'segment-members', segment?.id] });
      notifySuccess(`${formatNumber(r.added)} entered, ${formatNumber(r.removed)} left: ${formatNumber(r.total)} members`);
    },
    onError: (err) => showApiError(err),
  });
  const remove = useMutation({
    mutationFn: () => herald.segments.delete(segment?.id ?? ''),
    onSuccess: () => {
      void queryClient.invalidateQueries({ queryKey: [projectId, 'segments'] });
      notifySuccess('Segment deleted');
      navigate(`/p/${projectId}/segments`);
    },
    onError: (err) => {
      deleteModal.close();
      showApiError(err);
    },
  });

  return (
    <Stack>
      <div>
        <Anchor component={Link} to={`/p/${projectId}/segments`} size="sm">
          ← Segments
        </Anchor>
        <Title order={2}>{segment ? segment.name : 'New segment'}</Title>
      </div>
      <form onSubmit={form.onSubmit((v) => save.mutate(v))} noValidate>
        <Grid>
          <Grid.Col span={{ base: 12, md: 8 }}>
            <Stack>
              <TextInput label="Name" required maxLength={100} {...form.getInputProps('name')} />
              <Textarea label="Description" autosize minRows={1} maxLength={500} {...form.getInputProps('description')} />
              {!segment && (
                <SegmentedControl
                  aria-label="Segment type"
                  data={[
                    { value: 'DYNAMIC', label: 'Dynamic (a condition)' },
                    { value: 'STATIC', label: 'Static (a list)' },
                  ]}
                  {...form.getInputProps('type')}
                />
              )}
              <Switch label="Track membership (emit entry and exit events)" {...form.getInputProps('trackMembership', { type: 'checkbox' })} />
            </Stack>
          </Grid.Col>
          <Grid.Col span={{ base: 12, md: 4 }}>
            <Card withBorder>
              <Text size="sm" c="dimmed">
                {dynamic ? 'Contacts matching now' : 'Members'}
              </Text>
              {dynamic ? (
                <LiveCount condition={condition} />
              ) : (
                <Text fz={32} fw={700} data-testid="saved-count">
                  {segment ? formatNumber(segment.memberCount) : '0'}
                </Text>
              )}
              {segment?.type === 'DYNAMIC' && segment.trackMembership && (
                <Group gap="xs" mt="sm" justify="space-between">
                  <Text size="xs" c="dimmed" data-testid="tracked-count">
                    {formatNumber(segment.memberCount)} members as last computed
                  </Text>
                  <Button size="xs" variant="light" loading={compute.isPending} onClick={() => compute.mutate()}>
                    Compute now
                  </Button>
                </Group>
              )}
            </Card>
          </Grid.Col>
        </Grid>
        {dynamic && (
          <Card withBorder mt="md">
            <Title order={3} size="h4" mb="sm">
              Condition
            </Title>
            <ConditionBuilder
              value={condition}
              onChange={(c) => {
                setCondition(c);
                setConditionError(null);
              }}
              catalog={catalog}
            />
            {conditionError && (
              <Alert color="red" mt="sm" role="alert" data-testid="condition-error">
                {conditionError}
              </Alert>
            )}
          </Card>
        )}
        <Group justify="space-between" mt="md">
          {segment ? (
            <Button color="red" variant="light" onClick={deleteModal.open}>
              Delete segment
            </Button>
          ) : (
            <span />
          )}
          <Button type="submit" loading={save.isPending}>
            {segment ? 'Save segment' : 'Create segment'}
          </Button>
        </Group>
      </form>
      {segment && <Members segment={segment} />}
      <Modal opened={confirmDelete} onClose={deleteModal.close} title="Delete this segment?">
        <Stack>
          <Text size="sm">{segment?.name} is deleted; its contacts are not. A segment a scheduled campaign uses cannot be deleted.</Text>
          <Group justify="flex-end">
            <Button variant="default" onClick={deleteModal.close}>
              Cancel
            </Button>
            <Button color="red" loading={remove.isPending} onClick={() => remove.mutate()}>
              Delete segment
            </Button>
          </Group>
        </Stack>
      </Modal>
    </Stack>
  );
}

const MEMBER_PAGE = 25;

/** The member list (live for dynamic segments), one page at a time; a static segment's add and remove. */
function Members({ segment }: { segment: Segment }) {
  const projectId = useProjectId();
  const queryClient = useQueryClient();
  const [params, setParams] = useSearchParams();
  const page = Math.max(1, Number(params.get('page')) || 1);
  const [emails, setEmails] = useState('');
  const [pageSize, fitPageSize] = useFittingPageSize(MEMBER_PAGE);
  const members = useQuery({
    queryKey: [projectId, 'segment-members', segment.id, page, pageSize],
    queryFn: () => herald.segments.contacts(segment.id, { page, pageSize }),
    placeholderData: keepPreviousData,
  });
  fitPageSize(members.error);
  const changed = () => {
    void queryClient.invalidateQueries({ queryKey: [projectId, 'segment-members', segment.id] });
    void queryClient.invalidateQueries({ queryKey: [projectId, 'segment', segment.id] });
    void queryClient.invalidateQueries({ queryKey: [projectId, 'segments'] });
  };
  const add = useMutation({
    mutationFn: (list: string[]) => herald.segments.addMembers(segment.id, { emails: list, createMissing: true }),
    onSuccess: (r) => {
      setEmails('');
      changed();
      notifySuccess(`${r.added} added${r.created ? ` (${r.created} new contact${r.created === 1 ? '' : 's'})` : ''}`);
    },
    onError: (err) => showApiError(err),
  });
  const removeMember = useMutation({
    mutationFn: (email: string) => herald.segments.removeMembers(segment.id, { emails: [email] }),
    onSuccess: (_r, email) => {
      changed();
      notifySuccess(`${email} removed`);
    },
    onError: (err) => showApiError(err),
  });
  const isStatic = segment.type === 'STATIC';
  const parsed = emails
    .split(/[\s,;]+/)
    .map((e) => e.trim())
    .filter(Boolean);
  const totalPages = members.data ? Math.max(1, Math.ceil(members.data.total / pageSize)) : 1;

  return (
    <Card withBorder>
      <Group justify="space-between" mb="sm">
        <Title order={3} size="h4">
          Members {members.data && <span data-testid="member-total">({formatNumber(members.data.total)})</span>}
        </Title>
      </Group>
      {isStatic && (
        <Group align="flex-end" mb="md" wrap="wrap">
          <Textarea
            label="Add members"
            description="Email addresses separated by spaces, commas or new lines (at most 1,000); unknown addresses become contacts"
            autosize
            minRows={1}
            w={{ base: '100%', sm: 460 }}
            value={emails}
            onChange={(e) => setEmails(e.currentTarget.value)}
          />
          <Button variant="light" disabled={parsed.length === 0 || parsed.length > 1000} loading={add.isPending} onClick={() => add.mutate(parsed)}>
            Add
          </Button>
        </Group>
      )}
      {members.isPending ? (
        <Loading />
      ) : members.error ? (
        <PageError error={members.error} onRetry={() => void members.refetch()} />
      ) : members.data.data.length === 0 ? (
        <Empty title="No members">{isStatic ? 'Add email addresses above.' : 'No contact matches the saved condition right now.'}</Empty>
      ) : (
        <>
          <Table.ScrollContainer minWidth={400}>
            <Table data-testid="segment-members">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Email</Table.Th>
                  <Table.Th>Status</Table.Th>
                  {isStatic && (
                    <Table.Th w={100}>
                      <VisuallyHidden>Actions</VisuallyHidden>
                    </Table.Th>
                  )}
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {members.data.data.map((c) => (
                  <Table.Tr key={c.id}>
                    <Table.Td>
                      <Anchor component={Link} to={`/p/${projectId}/contacts/${c.id}`}>
                        {c.email}
                      </Anchor>
                    </Table.Td>
                    <Table.Td>{c.subscribed ? 'subscribed' : 'unsubscribed'}</Table.Td>
                    {isStatic && (
                      <Table.Td>
                        <Button
                          size="compact-xs"
                          variant="subtle"
                          color="red"
                          aria-label={`Remove ${c.email}`}
                          loading={removeMember.isPending && removeMember.variables === c.email}
                          onClick={() => removeMember.mutate(c.email)}
                        >
                          Remove
                        </Button>
                      </Table.Td>
                    )}
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
          {totalPages > 1 && (
            <Group justify="flex-end" mt="md">
              <Pagination
                total={totalPages}
                value={page}
                onChange={(p) => {
                  const next = new URLSearchParams(params);
                  next.set('page', String(p));
                  setParams(next, { replace: true });
                }}
              />
            </Group>
          )}
        </>
      )}
    </Card>
  );
}
