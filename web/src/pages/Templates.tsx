import { Anchor, Badge, Button, Grid, Group, Modal, Pagination, Select, Stack, Table, Text, TextInput, Title } from '@mantine/core';
import { useForm } from '@mantine/form';
import { useDebouncedValue } from '@mantine/hooks';
import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { Link, useNavigate, useParams, useSearchParams } from 'react-router';
import { herald } from '../api.ts';
import { MessageFields, type MessageValues, messagePayload } from '../components/MessageFields.tsx';
import { LivePreview } from '../components/Preview.tsx';
import { useUnsavedChangesGuard } from '../components/UnsavedChanges.tsx';
import { notifySuccess, showApiError } from '../components/forms.ts';
import { Empty, Loading, PageError, PageHeader } from '../components/states.tsx';
import { formatDate, useFittingPageSize, useProjectId } from '../hooks.ts';
import { detailState } from '../components/DetailState.tsx';
import { EMAIL_TYPES, emailTypeOf, type Template } from '../types.ts';

export function TemplatesPage() {
  const projectId = useProjectId();
  const [params, setParams] = useSearchParams();
  const page = Math.max(1, Number(params.get('page')) || 1);
  const type = emailTypeOf(params.get('type'));
  const [search, setSearch] = useState(params.get('search') ?? '');
  const [debounced] = useDebouncedValue(search, 300);
  const setParam = (key: string, value: string | null) => {
    const next = new URLSearchParams(params);
    if (value) next.set(key, value);
    else next.delete(key);
    if (key !== 'page') next.delete('page');
    setParams(next, { replace: true });
  };
  useEffect(() => {
    if (debounced !== (params.get('search') ?? '')) setParam('search', debounced || null);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [debounced]);
  const [pageSize, fitPageSize] = useFittingPageSize(20);
  const list = useQuery({
    queryKey: [projectId, 'templates', { page, pageSize, type, search: debounced }],
    queryFn: () => herald.templates.list({ page, pageSize, type: type ?? undefined, search: debounced || undefined, sort: 'updatedAt' }),
    placeholderData: keepPreviousData,
  });
  fitPageSize(list.error);
  return (
    <>
      <PageHeader title="Templates">
        <Button component={Link} to={`/p/${projectId}/templates/new`}>
          New template
        </Button>
      </PageHeader>
      <Group mb="md" wrap="wrap">
        <TextInput
          label="Search"
          placeholder="Name or subject"
          value={search}
          onChange={(e) => setSearch(e.currentTarget.value)}
          w={{ base: '100%', sm: 300 }}
        />
        <Select label="Type" placeholder="All types" clearable data={EMAIL_TYPES} value={type} onChange={(v) => setParam('type', v)} w={200} />
      </Group>
      {list.isPending ? (
        <Loading />
      ) : list.error ? (
        <PageError error={list.error} onRetry={() => void list.refetch()} />
      ) : list.data.data.length === 0 ? (
        <Empty title={debounced || type ? 'No templates match' : 'No templates yet'}>
          Templates hold reusable content for transactional sends and campaigns.
        </Empty>
      ) : (
        <>
          <Table.ScrollContainer minWidth={600}>
            <Table striped highlightOnHover>
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Name</Table.Th>
                  <Table.Th>Subject</Table.Th>
                  <Table.Th>Type</Table.Th>
                  <Table.Th>Updated</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {list.data.data.map((t) => (
                  <Table.Tr key={t.id}>
                    <Table.Td>
                      <Anchor component={Link} to={`/p/${projectId}/templates/${t.id}`}>
                        {t.name}
                      </Anchor>
                    </Table.Td>
                    <Table.Td>{t.subject}</Table.Td>
                    <Table.Td>
                      <Badge variant="light">{t.type}</Badge>
                    </Table.Td>
                    <Table.Td>{formatDate(t.updatedAt)}</Table.Td>
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

const EMPTY: MessageValues = {
  name: '',
  subject: '',
  from: '',
  fromName: '',
  replyTo: '',
  type: 'MARKETING',
  body: '<p>Hi {{firstName ?? "there"}},</p>\n<p></p>\n<p><a href="{{unsubscribeUrl}}">Unsubscribe</a></p>',
};

export function TemplateEditorPage() {
  const projectId = useProjectId();
  const { templateId } = useParams();
  const template = useQuery({
    queryKey: [projectId, 'template', templateId],
    queryFn: () => herald.templates.get(templateId ?? ''),
    enabled: Boolean(templateId),
  });
  const state = templateId ? detailState(template, projectId, 'templates') : null;
  if (state) return state;
  return <TemplateEditor key={templateId ?? 'new'} template={template.data} />;
}

function TemplateEditor({ template }: { template?: Template }) {
  const projectId = useProjectId();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const [confirmDelete, setConfirmDelete] = useState(false);
  const form = useForm<MessageValues>({
    mode: 'controlled',
    initialValues: template
      ? {
          name: template.name,
          subject: template.subject,
          from: template.from,
          fromName: template.fromName ?? '',
          replyTo: template.replyTo ?? '',
          type: template.type,
          body: template.body,
        }
      : EMPTY,
  });
  useUnsavedChangesGuard(() => form.isDirty());
  const save = useMutation({
    mutationFn: (v: MessageValues) => (template ? herald.templates.update(template.id, messagePayload(v)) : herald.templates.create(messagePayload(v))),
    onSuccess: (saved) => {
      void queryClient.invalidateQueries({ queryKey: [projectId] });
      notifySuccess('Template saved');
      form.resetDirty();
      if (!template) navigate(`/p/${projectId}/templates/${saved.id}`, { replace: true });
    },
    onError: (err) => showApiError(err, form),
  });
  const duplicate = useMutation({
    mutationFn: () => herald.templates.duplicate(template?.id ?? ''),
    onSuccess: (copy) => {
      void queryClient.invalidateQueries({ queryKey: [projectId, 'templates'] });
      navigate(`/p/${projectId}/templates/${copy.id}`);
    },
    onError: (err) => showApiError(err),
  });
  const remove = useMutation({
    mutationFn: () => herald.templates.delete(template?.id ?? ''),
    onSuccess: () => {
      void queryClient.invalidateQueries({ queryKey: [projectId, 'templates'] });
      navigate(`/p/${projectId}/templates`);
    },
    onError: (err) => showApiError(err),
  });
  return (
    <Stack>
      <Group justify="space-between" wrap="wrap">
        <div>
          <Anchor component={Link} to={`/p/${projectId}/templates`} size="sm">
            ← Templates
          </Anchor>
          <Title order={2}>{template ? template.name : 'New template'}</Title>
          {template && <TemplateUsage templateId={template.id} />}
        </div>
        {template && (
          <Group gap="xs">
            <Button variant="default" size="xs" onClick={() => duplicate.mutate()} loading={duplicate.isPending}>
              Duplicate
            </Button>
            <Button variant="subtle" color="red" size="xs" onClick={() => setConfirmDelete(true)}>
              Delete
            </Button>
          </Group>
        )}
      </Group>
      <Grid gap="lg">
        <Grid.Col span={{ base: 12, md: 6 }}>
          <form onSubmit={form.onSubmit((v) => save.mutate(v))} noValidate>
            <Stack gap="sm">
              <MessageFields form={form} />
              <Group justify="flex-end">
                <Button type="submit" loading={save.isPending}>
                  {template ? 'Save changes' : 'Create template'}
                </Button>
              </Group>
            </Stack>
          </form>
        </Grid.Col>
        <Grid.Col span={{ base: 12, md: 6 }}>
          <LivePreview subject={form.values.subject} body={form.values.body} type={form.values.type} />
        </Grid.Col>
      </Grid>
      <Modal opened={confirmDelete} onClose={() => setConfirmDelete(false)} title="Delete this template?">
        <Stack>
          <Text size="sm">Sends that reference it by id will fail. This cannot be undone.</Text>
          <Group justify="flex-end">
            <Button variant="default" onClick={() => setConfirmDelete(false)}>
              Cancel
            </Button>
            <Button color="red" loading={remove.isPending} onClick={() => remove.mutate()}>
              Delete template
            </Button>
          </Group>
        </Stack>
      </Modal>
    </Stack>
  );
}

/** What sends this template (GET /templates/:id/usage): workflow steps today. */
function TemplateUsage({ templateId }: { templateId: string }) {
  const projectId = useProjectId();
  const usage = useQuery({ queryKey: [projectId, 'template-usage', templateId], queryFn: () => herald.templates.usage(templateId) });
  if (!usage.data) return null;
  const workflows = [...new Map(usage.data.workflows.map((w) => [w.id, w])).values()];
  return (
    <Text size="sm" c="dimmed" data-testid="template-usage">
      {workflows.length === 0 ? (
        'Not sent by any workflow'
      ) : (
        <>
          Sent by{' '}
          {workflows.map((w, i) => (
            <span key={w.id}>
              {i > 0 && ', '}
              <Anchor component={Link} to={`/p/${projectId}/workflows/${w.id}`} size="sm">
                {w.name}
              </Anchor>
            </span>
          ))}
        </>
      )}
    </Text>
  );
}
