import {
  ActionIcon,
  Alert,
  Anchor,
  Badge,
  Button,
  Card,
  Checkbox,
  Code,
  Group,
  Modal,
  SegmentedControl,
  Select,
  Stack,
  Switch,
  Table,
  Text,
  TextInput,
  Timeline,
  Title,
} from '@mantine/core';
import { useForm } from '@mantine/form';
import { useDisclosure } from '@mantine/hooks';
import { keepPreviousData, useInfiniteQuery, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useCallback, useState } from 'react';
import { Link, useNavigate, useParams, useSearchParams } from 'react-router';
import { herald, isApiError } from '../api.ts';
import { BulkBar, ImportModal, MAX_BULK } from '../components/ContactJobs.tsx';
import { dataLine } from '../components/data-line.ts';
import { notifySuccess, showApiError } from '../components/forms.ts';
import { Empty, LoadMore, Loading, PageError, PageHeader } from '../components/states.tsx';
import { detailState } from '../components/DetailState.tsx';
import { SuppressionNotice } from '../components/SuppressionNotice.tsx';
import { cursorPaging, formatDate, useProjectId, useUrlCursors, useUrlSearch, withoutCursors } from '../hooks.ts';
import type { Answer } from '../types.ts';

type ActivityItem = Answer<'activity.list'>['data'][number];

const PAGE_SIZE = 25;
const SORTS = [
  { value: 'newest', label: 'Newest first', sort: 'createdAt', dir: 'desc' },
  { value: 'oldest', label: 'Oldest first', sort: 'createdAt', dir: 'asc' },
  { value: 'email', label: 'Email A–Z', sort: 'email', dir: 'asc' },
  { value: 'email-desc', label: 'Email Z–A', sort: 'email', dir: 'desc' },
] as const;

export function ContactsPage() {
  const projectId = useProjectId();
  const [params, setParams] = useSearchParams();
  const subscribed = params.get('subscribed') ?? 'all';
  const order = SORTS.find((s) => s.value === params.get('order')) ?? SORTS[0];
  const paging = useUrlCursors();
  const cursor = paging.cursor;
  const [creating, createModal] = useDisclosure(false);
  const [importing, importModal] = useDisclosure(false);
  // Selected rows, kept across pages (ids; at most MAX_BULK can be acted on at once).
  const [selected, setSelected] = useState<string[]>([]);
  const clearSelection = useCallback(() => setSelected([]), []);
  const [searchInput, setSearchInput, search] = useUrlSearch(() => setSelected([]));

  const pageQuery = (pageCursor: string | undefined) => ({
    queryKey: [projectId, 'contacts', { search, subscribed, cursor: pageCursor, order: order.value }],
    queryFn: () =>
      herald.contacts.list({
        limit: PAGE_SIZE,
        cursor: pageCursor,
        search: search || undefined,
        subscribed: subscribed === 'all' ? undefined : subscribed === 'subscribed' ? ('true' as const) : ('false' as const),
        sort: order.sort,
        dir: order.dir,
      }),
    placeholderData: keepPreviousData,
  });
  const list = useQuery(pageQuery(cursor));
  // The total comes with the first page only. That page is watched from the later ones too (the same
  // query on the first page), so a change there (a bulk delete) fetches it again and the total follows.
  const firstPage = useQuery(pageQuery(undefined));
  const total = firstPage.data?.total ?? null;

  return (
    <>
      <PageHeader title="Contacts">
        <Button variant="default" onClick={importModal.open}>
          Import CSV
        </Button>
        <Button onClick={createModal.open}>New contact</Button>
      </PageHeader>
      <Group mb="md" align="flex-end" wrap="wrap">
        <TextInput
          label="Search"
          placeholder="Email address"
          value={searchInput}
          onChange={(e) => setSearchInput(e.currentTarget.value)}
          w={{ base: '100%', sm: 320 }}
        />
        <SegmentedControl
          aria-label="Subscription"
          value={subscribed}
          onChange={(v) => {
            const next = withoutCursors(params);
            if (v === 'all') next.delete('subscribed');
            else next.set('subscribed', v);
            setParams(next, { replace: true });
            setSelected([]);
          }}
          data={[
            { value: 'all', label: 'All' },
            { value: 'subscribed', label: 'Subscribed' },
            { value: 'unsubscribed', label: 'Unsubscribed' },
          ]}
        />
        <Select
          label="Sort"
          w={160}
          allowDeselect={false}
          data={SORTS.map((s) => ({ value: s.value, label: s.label }))}
          value={order.value}
          onChange={(v) => {
            const next = withoutCursors(params);
            if (!v || v === 'newest') next.delete('order');
            else next.set('order', v);
            setParams(next, { replace: true });
          }}
        />
        {total !== null && (
          <Text size="sm" c="dimmed" ml="auto">
            {total.toLocaleString()} contact{total === 1 ? '' : 's'}
          </Text>
        )}
      </Group>
      {list.isPending ? (
        <Loading />
      ) : list.error ? (
        <PageError error={list.error} onRetry={() => void list.refetch()} />
      ) : list.data.data.length === 0 ? (
        <Empty title={search || subscribed !== 'all' ? 'No contacts match' : 'No contacts yet'}>
          {search || subscribed !== 'all'
            ? 'Try another search or filter.'
            : 'Add one here, import a CSV, or send with /v1/send and /v1/track: contacts are created as you go.'}
        </Empty>
      ) : (
        <>
          {selected.length > 0 && <BulkBar selected={selected} onDone={clearSelection} onClear={clearSelection} />}
          <Table.ScrollContainer minWidth={560}>
            <Table striped highlightOnHover>
              <Table.Thead>
                <Table.Tr>
                  <Table.Th w={40}>
                    <Checkbox
                      aria-label="Select all contacts on this page"
                      checked={list.data.data.every((c) => selected.includes(c.id))}
                      indeterminate={list.data.data.some((c) => selected.includes(c.id)) && !list.data.data.every((c) => selected.includes(c.id))}
                      onChange={(e) => {
                        const ids = list.data.data.map((c) => c.id);
                        setSelected(
                          e.currentTarget.checked
                            ? [...selected, ...ids.filter((id) => !selected.includes(id))].slice(0, MAX_BULK)
                            : selected.filter((id) => !ids.includes(id)),
                        );
                      }}
                    />
                  </Table.Th>
                  <Table.Th>Email</Table.Th>
                  <Table.Th>Status</Table.Th>
                  <Table.Th>Fields</Table.Th>
                  <Table.Th>Created</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {list.data.data.map((c) => (
                  <Table.Tr key={c.id}>
                    <Table.Td>
                      <Checkbox
                        aria-label={`Select ${c.email}`}
                        checked={selected.includes(c.id)}
                        onChange={(e) => setSelected(e.currentTarget.checked ? [...selected, c.id] : selected.filter((id) => id !== c.id))}
                      />
                    </Table.Td>
                    <Table.Td>
                      <Anchor component={Link} to={`/p/${projectId}/contacts/${c.id}`}>
                        {c.email}
                      </Anchor>
                    </Table.Td>
                    <Table.Td>
                      <Badge color={c.subscribed ? 'green' : 'gray'} variant="dot">
                        {c.subscribed ? 'subscribed' : 'unsubscribed'}
                      </Badge>
                    </Table.Td>
                    <Table.Td>{Object.keys(c.data ?? {}).length}</Table.Td>
                    <Table.Td>{formatDate(c.createdAt)}</Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
          <Group justify="flex-end" mt="md">
            <Button variant="default" disabled={!paging.hasPrevious} onClick={paging.previous}>
              Previous
            </Button>
            <Button variant="default" disabled={!list.data.hasMore || !list.data.cursor} onClick={() => list.data.cursor && paging.next(list.data.cursor)}>
              Next
            </Button>
          </Group>
        </>
      )}
      <CreateContactModal opened={creating} onClose={createModal.close} />
      <ImportModal opened={importing} onClose={importModal.close} />
    </>
  );
}

type FieldType = 'string' | 'number' | 'boolean';

/**
 * A plain decimal (`12`, `-0.5`, `3e4`): not `0x10`, `Infinity` or `1e400`, which Number() would turn
 * into 16, Infinity or Infinity, and an infinite number is `null` in JSON, which deletes the field.
 */
const DECIMAL = /^-?\d+(\.\d+)?([eE][-+]?\d+)?$/;
const numberError = (raw: string) =>
  raw.trim() === '' || !DECIMAL.test(raw.trim()) ? 'Enter a number' : Number.isFinite(Number(raw)) ? null : 'Too large to store as a number';

/** Keys the API drops from `data` without a word (api-spec § Custom fields, "Reserved keys"). */
const RESERVED_KEYS = new Set(['id', 'svc_id', 'svc_email', 'email', 'unsubscribeUrl', 'subscribeUrl', 'manageUrl', '__proto__']);

function fieldKeyError(raw: string): string | null {
  const key = raw.trim();
  if (!key) return 'Name the field';
  if (RESERVED_KEYS.has(key)) return `${key} is reserved: the service sets it, so it cannot be stored as a field`;
  if (key.includes('.')) return 'A field name cannot contain a dot. Nested values (an object) are set through the API';
  return null;
}

function typedValue(type: FieldType, raw: string): string | number | boolean {
  if (type === 'number') return Number(raw.trim());
  if (type === 'boolean') return raw === 'true';
  return raw;
}

/**
 * Creates a contact, never changes one: an address that already exists (which POST /contacts would
 * overwrite, re-subscribing someone who left) is named in the form with a link to its page instead.
 */
function CreateContactModal({ opened, onClose }: { opened: boolean; onClose: () => void }) {
  const projectId = useProjectId();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const form = useForm({
    mode: 'controlled',
    initialValues: { email: '', subscribed: true, firstName: '' },
  });
  const [existing, setExisting] = useState<{ id: string; email: string } | null>(null);
  const create = useMutation({
    mutationFn: async (v: typeof form.values) => {
      // An address the lookup refuses is left to the create, whose error names the Email field.
      const {
        found: [hit],
      } = await herald.contacts.lookup({ emails: [v.email] }).catch((err: unknown) => {
        if (isApiError(err, 400, 422)) return { found: [] };
        throw err;
      });
      if (hit) return { existing: hit };
      const contact = await herald.contacts.upsert({
        email: v.email,
        subscribed: v.subscribed,
        ...(v.firstName ? { data: { firstName: v.firstName } } : {}),
      });
      return { created: contact };
    },
    onSuccess: (result) => {
      if (!result.created) {
        setExisting(result.existing);
        return;
      }
      void queryClient.invalidateQueries({ queryKey: [projectId] });
      form.reset();
      onClose();
      notifySuccess('Contact saved');
      navigate(`/p/${projectId}/contacts/${result.created.id}`);
    },
    onError: (err) => showApiError(err, form),
  });
  const shownExisting = existing && existing.email === form.values.email.trim().toLowerCase() ? existing : null;
  return (
    <Modal opened={opened} onClose={onClose} title="New contact">
      <form onSubmit={form.onSubmit((v) => create.mutate(v))} noValidate>
        <Stack>
          <TextInput label="Email" required {...form.getInputProps('email')} />
          {shownExisting && (
            <Alert color="yellow" p="xs" data-testid="contact-exists">
              {shownExisting.email} is already a contact; nothing was changed.{' '}
              <Anchor component={Link} to={`/p/${projectId}/contacts/${shownExisting.id}`} onClick={onClose}>
                Open their page
              </Anchor>
            </Alert>
          )}
          <TextInput label="First name" description="Stored as data.firstName" {...form.getInputProps('firstName')} />
          <Checkbox label="Subscribed to marketing email" {...form.getInputProps('subscribed', { type: 'checkbox' })} />
          <Group justify="flex-end">
            <Button variant="default" onClick={onClose}>
              Cancel
            </Button>
            <Button type="submit" loading={create.isPending}>
              Create contact
            </Button>
          </Group>
        </Stack>
      </form>
    </Modal>
  );
}

/**
 * What happened, in one line: an email's subject linking to its page; otherwise the data, where an
 * event naming the email it came from (an unsubscribe through that email's link) links that email
 * instead of printing its ID.
 */
function HappeningLine({ projectId, item }: { projectId: string; item: ActivityItem }) {
  const emailPage = (id: string) => `/p/${projectId}/emails/${id}`;
  if (item.emailId) {
    return (
      <Anchor component={Link} to={emailPage(item.emailId)} size="sm">
        {item.subject || 'View email'}
      </Anchor>
    );
  }
  const { emailId: fromEmail, ...rest } = item.data;
  if (item.subject === undefined && typeof fromEmail === 'string') {
    return (
      <Text size="sm" lineClamp={2}>
        {Object.keys(rest).length > 0 ? `${dataLine(rest)} · ` : ''}
        <Anchor component={Link} to={emailPage(fromEmail)} size="sm">
          the email it came from
        </Anchor>
      </Text>
    );
  }
  return (
    <Text size="sm" lineClamp={2}>
      {item.subject ?? dataLine(item.data)}
    </Text>
  );
}

export function ContactPage() {
  const projectId = useProjectId();
  const { contactId = '' } = useParams();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const [confirmDelete, deleteModal] = useDisclosure(false);
  const contact = useQuery({
    queryKey: [projectId, 'contact', contactId],
    queryFn: () => herald.contacts.get(contactId),
  });
  const timeline = useInfiniteQuery({
    queryKey: [projectId, 'activity', { contactId }],
    queryFn: ({ pageParam }) => herald.activity.list({ contactId, limit: 25, cursor: pageParam }),
    ...cursorPaging,
  });
  const happenings = timeline.data?.pages.flatMap((p) => p.data) ?? [];
  const showUpdated = (updated: Answer<'contacts.update'>) => {
    queryClient.setQueryData([projectId, 'contact', contactId], updated);
    void queryClient.invalidateQueries({ queryKey: [projectId, 'contacts'] });
    void queryClient.invalidateQueries({ queryKey: [projectId, 'activity'] });
  };
  const patch = useMutation({
    mutationFn: (body: { subscribed?: boolean; data?: Record<string, unknown> }) => herald.contacts.update(contactId, body),
    onSuccess: (updated) => showUpdated(updated),
    onError: (err) => showApiError(err),
  });
  const setField = useMutation({
    mutationFn: (data: Record<string, unknown>) => herald.contacts.update(contactId, { data }),
    onSuccess: (updated) => {
      showUpdated(updated);
      fieldForm.reset();
    },
    // An error the API names on `data.<key>` (a dot in the key) shows under Field, not in a toast.
    onError: (err) => showApiError(err, { setFieldError: (_path, message) => fieldForm.setFieldError('key', message), getValues: () => ({ data: null }) }),
  });
  const remove = useMutation({
    mutationFn: () => herald.contacts.delete(contactId),
    onSuccess: () => {
      void queryClient.invalidateQueries({ queryKey: [projectId, 'contacts'] });
      notifySuccess('Contact deleted');
      navigate(`/p/${projectId}/contacts`);
    },
    onError: (err) => showApiError(err),
  });
  const fieldForm = useForm({
    mode: 'controlled',
    initialValues: { key: '', type: 'string' as FieldType, value: '' },
    validate: {
      key: fieldKeyError,
      // An empty value is refused, not saved as 0, false or nothing.
      value: (v, values) => {
        if (values.type === 'number') return numberError(v);
        if (values.type === 'boolean') return v === 'true' || v === 'false' ? null : 'Choose true or false';
        return v === '' ? 'Enter a value' : null;
      },
    },
  });

  const state = detailState(contact, projectId, 'contacts');
  if (state || !contact.data) return state;
  const c = contact.data;
  const entries = Object.entries(c.data ?? {});

  return (
    <Stack>
      <Group justify="space-between" wrap="wrap">
        <div>
          <Anchor component={Link} to={`/p/${projectId}/contacts`} size="sm">
            ← Contacts
          </Anchor>
          <Title order={2}>{c.email}</Title>
          <Text size="sm" c="dimmed">
            Created {formatDate(c.createdAt)} · <Code>{c.id}</Code>
          </Text>
        </div>
        <Group>
          <Switch
            label="Subscribed"
            checked={c.subscribed}
            disabled={patch.isPending}
            onChange={(e) => patch.mutate({ subscribed: e.currentTarget.checked })}
          />
          <Button color="red" variant="light" onClick={deleteModal.open}>
            Delete
          </Button>
        </Group>
      </Group>

      <SuppressionNotice email={c.email} />

      <Card withBorder>
        <Title order={3} size="h4" mb="sm">
          Data
        </Title>
        {entries.length === 0 ? (
          <Text c="dimmed" size="sm">
            No custom fields yet.
          </Text>
        ) : (
          <Table.ScrollContainer minWidth={400}>
            <Table>
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Field</Table.Th>
                  <Table.Th>Value</Table.Th>
                  <Table.Th w={60}>
                    <span aria-hidden />
                  </Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {entries.map(([k, v]) => (
                  <Table.Tr key={k}>
                    <Table.Td>
                      <Code>{k}</Code>
                    </Table.Td>
                    <Table.Td style={{ wordBreak: 'break-all' }}>{typeof v === 'string' ? v : JSON.stringify(v)}</Table.Td>
                    <Table.Td>
                      <ActionIcon variant="subtle" color="red" aria-label={`Remove ${k}`} onClick={() => patch.mutate({ data: { [k]: null } })}>
                        ×
                      </ActionIcon>
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
        )}
        <form onSubmit={fieldForm.onSubmit((v) => setField.mutate({ [v.key.trim()]: typedValue(v.type, v.value) }))} noValidate>
          <Group mt="md" align="flex-start" wrap="wrap">
            <TextInput label="Field" placeholder="plan" {...fieldForm.getInputProps('key')} />
            <Select label="Type" w={120} allowDeselect={false} data={['string', 'number', 'boolean']} {...fieldForm.getInputProps('type')} />
            {fieldForm.values.type === 'boolean' ? (
              <Select label="Value" w={120} data={['true', 'false']} {...fieldForm.getInputProps('value')} />
            ) : (
              <TextInput label="Value" {...fieldForm.getInputProps('value')} />
            )}
            <Button type="submit" mt={25} variant="light" loading={patch.isPending}>
              Set field
            </Button>
          </Group>
        </form>
      </Card>

      <Card withBorder>
        <Title order={3} size="h4" mb="sm">
          Events and emails
        </Title>
        {timeline.isPending ? (
          <Loading />
        ) : timeline.error ? (
          <PageError error={timeline.error} onRetry={() => void timeline.refetch()} />
        ) : happenings.length === 0 ? (
          <Text c="dimmed" size="sm">
            Nothing has happened to this contact yet.
          </Text>
        ) : (
          <Timeline bulletSize={14} lineWidth={2} data-testid="contact-timeline">
            {happenings.map((a) => (
              <Timeline.Item key={a.id} title={a.eventName ?? a.type}>
                <HappeningLine projectId={projectId} item={a} />
                <Text size="xs" c="dimmed">
                  {formatDate(a.occurredAt)}
                </Text>
              </Timeline.Item>
            ))}
          </Timeline>
        )}
        <LoadMore list={timeline} />
      </Card>

      <Modal opened={confirmDelete} onClose={deleteModal.close} title="Delete this contact?">
        <Stack>
          <Text size="sm">{c.email} and its custom data are deleted. This cannot be undone.</Text>
          <Group justify="flex-end">
            <Button variant="default" onClick={deleteModal.close}>
              Cancel
            </Button>
            <Button color="red" loading={remove.isPending} onClick={() => remove.mutate()}>
              Delete contact
            </Button>
          </Group>
        </Stack>
      </Modal>
    </Stack>
  );
}
