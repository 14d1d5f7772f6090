import { Anchor, Badge, Button, Card, Group, Modal, Stack, Table, Text, TextInput, Title, VisuallyHidden } from '@mantine/core';
import { keepPreviousData, useInfiniteQuery, useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'react-router';
import { herald } from '../api.ts';
import { showApiError, notifySuccess } from '../components/forms.ts';
import { canManage, useProject } from '../components/ProjectLayout.tsx';
import { Empty, LoadMore, Loading, PageError, PageHeader } from '../components/states.tsx';
import { StatusSelect, useUrlChoice } from '../components/StatusSelect.tsx';
import { cursorPaging, formatDate, formatNumber, useUrlSearch } from '../hooks.ts';
import type { Answer } from '../types.ts';

type Suppression = Answer<'suppressions.list'>['data'][number];

const REASONS = ['bounce', 'complaint', 'manual'] as const;
const REASON_COLORS: Record<Suppression['reason'], string> = { bounce: 'orange', complaint: 'red', manual: 'gray' };
const PAGE_SIZE = 50;

/**
 * The addresses the project no longer sends to (GET /suppressions), newest first, 50 at a time: a
 * search on the address and a reason, both kept in the URL; each entry links the email that caused
 * it. ADMINs and OWNERs remove an entry (DELETE /suppressions/:email) after a confirmation.
 */
export function SuppressionsPage() {
  const project = useProject();
  const mayManage = canManage(project);
  const [searchInput, setSearchInput, search] = useUrlSearch();
  const [reason, setReason] = useUrlChoice('reason', REASONS);
  const [removing, setRemoving] = useState<Suppression | null>(null);
  const queryClient = useQueryClient();

  const list = useInfiniteQuery({
    queryKey: [project.id, 'suppressions', { search, reason }],
    queryFn: ({ pageParam }) => herald.suppressions.list({ limit: PAGE_SIZE, cursor: pageParam, search: search || undefined, reason: reason ?? undefined }),
    placeholderData: keepPreviousData,
    ...cursorPaging,
  });
  const items = list.data?.pages.flatMap((p) => p.data) ?? [];
  const total = list.data?.pages[0]?.total;

  const remove = useMutation({
    mutationFn: (email: string) => herald.suppressions.delete(email),
    onSuccess: (_answer, email) => {
      setRemoving(null);
      notifySuccess(`${email} can receive mail again`);
      void queryClient.invalidateQueries({ queryKey: [project.id, 'suppressions'] });
    },
    onError: (err) => showApiError(err),
  });

  return (
    <Stack>
      <PageHeader title="Suppressions" />
      <Text c="dimmed">
        Addresses this project no longer sends to. A hard bounce or a spam complaint adds the address here and unsubscribes its contact; every later email to it
        is recorded as SUPPRESSED and not sent.
      </Text>
      <Card withBorder>
        <Group justify="space-between" mb="sm" align="flex-end" wrap="wrap">
          <Title order={3} size="h4">
            Suppressed addresses
            {total !== undefined && (
              <Text span size="sm" c="dimmed" ml="xs" data-testid="suppressions-total">
                {formatNumber(total)}
              </Text>
            )}
          </Title>
          <Group align="flex-end">
            <TextInput
              aria-label="Search addresses"
              placeholder="Search addresses"
              size="xs"
              w={240}
              value={searchInput}
              onChange={(e) => setSearchInput(e.currentTarget.value)}
            />
            <StatusSelect label="Reason" placeholder="Any reason" value={reason} choices={REASONS} onChange={setReason} />
          </Group>
        </Group>
        {list.isPending ? (
          <Loading />
        ) : list.error ? (
          <PageError error={list.error} onRetry={() => void list.refetch()} />
        ) : items.length === 0 ? (
          <Empty title={search || reason ? 'No suppressed address matches' : 'No suppressed addresses'}>
            {search || reason ? 'Try another search or reason.' : 'Hard bounces and spam complaints appear here as they happen.'}
          </Empty>
        ) : (
          <Table.ScrollContainer minWidth={560}>
            <Table data-testid="suppressions">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Address</Table.Th>
                  <Table.Th>Reason</Table.Th>
                  <Table.Th>Since</Table.Th>
                  {mayManage && (
                    <Table.Th>
                      <VisuallyHidden>Actions</VisuallyHidden>
                    </Table.Th>
                  )}
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {items.map((s) => (
                  <Table.Tr key={s.email}>
                    <Table.Td>{s.email}</Table.Td>
                    <Table.Td>
                      <Group gap="xs">
                        <Badge color={REASON_COLORS[s.reason]} variant="light">
                          {s.reason}
                        </Badge>
                        {s.emailId && (
                          <Anchor component={Link} to={`/p/${project.id}/emails/${s.emailId}`} size="sm">
                            the email
                          </Anchor>
                        )}
                      </Group>
                    </Table.Td>
                    <Table.Td>{formatDate(s.createdAt)}</Table.Td>
                    {mayManage && (
                      <Table.Td ta="right">
                        <Button size="xs" variant="subtle" color="red" aria-label={`Remove ${s.email}`} onClick={() => setRemoving(s)}>
                          Remove
                        </Button>
                      </Table.Td>
                    )}
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
        )}
        <LoadMore list={list} />
      </Card>
      <Modal opened={removing !== null} onClose={() => setRemoving(null)} title={`Remove ${removing?.email ?? ''}?`}>
        <Stack>
          <Text size="sm">
            Herald sends to this address again. Its contact stays unsubscribed: subscribe it on its page for marketing email to reach it. An address that
            bounced may bounce again and be suppressed again.
          </Text>
          <Group justify="flex-end">
            <Button variant="default" onClick={() => setRemoving(null)}>
              Cancel
            </Button>
            <Button color="red" loading={remove.isPending} onClick={() => removing && remove.mutate(removing.email)}>
              Remove from suppressions
            </Button>
          </Group>
        </Stack>
      </Modal>
    </Stack>
  );
}
