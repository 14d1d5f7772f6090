import { Anchor, Badge, MultiSelect, Table, Text } from '@mantine/core';
import { useInfiniteQuery, useQuery } from '@tanstack/react-query';
import { Link, useSearchParams } from 'react-router';
import { herald } from '../api.ts';
import { dataLine } from '../components/data-line.ts';
import { Empty, LoadMore, Loading, PageError, PageHeader } from '../components/states.tsx';
import { cursorPaging, formatDate, useProjectId } from '../hooks.ts';

const COLORS: Record<string, string> = {
  'email.sent': 'blue',
  'email.delivered': 'teal',
  'email.opened': 'indigo',
  'email.clicked': 'grape',
  'email.bounced': 'red',
  'email.complained': 'red',
  'email.failed': 'red',
};

export function ActivityPage() {
  const projectId = useProjectId();
  const [params, setParams] = useSearchParams();
  const types = params.get('types')?.split(',').filter(Boolean) ?? [];
  const known = useQuery({ queryKey: [projectId, 'activity-types'], queryFn: () => herald.activity.types() });
  const typeOptions = known.data?.types ?? [];
  const feed = useInfiniteQuery({
    queryKey: [projectId, 'activity', { types }],
    queryFn: ({ pageParam }) => herald.activity.list({ limit: 50, cursor: pageParam, types: types.join(',') || undefined }),
    ...cursorPaging,
  });
  const items = feed.data?.pages.flatMap((p) => p.data) ?? [];
  return (
    <>
      <PageHeader title="Activity" />
      <MultiSelect
        label="Types"
        placeholder={types.length ? undefined : 'All activity'}
        data={[...new Set([...typeOptions, ...types])]}
        value={types}
        onChange={(v) => {
          const next = new URLSearchParams(params);
          if (v.length) next.set('types', v.join(','));
          else next.delete('types');
          setParams(next, { replace: true });
        }}
        clearable
        mb="md"
        maw={520}
      />
      {feed.isPending ? (
        <Loading />
      ) : feed.error ? (
        <PageError error={feed.error} onRetry={() => void feed.refetch()} />
      ) : items.length === 0 ? (
        <Empty title="No activity yet">Sends, deliveries, opens, clicks, bounces and tracked events show up here.</Empty>
      ) : (
        <>
          <Table.ScrollContainer minWidth={640}>
            <Table striped>
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>When</Table.Th>
                  <Table.Th>Type</Table.Th>
                  <Table.Th>Contact</Table.Th>
                  <Table.Th>Detail</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {items.map((a) => (
                  <Table.Tr key={a.id}>
                    <Table.Td style={{ whiteSpace: 'nowrap' }}>{formatDate(a.occurredAt)}</Table.Td>
                    <Table.Td>
                      <Badge variant="light" color={COLORS[a.type] ?? 'gray'}>
                        {a.type === 'event' ? (a.eventName ?? 'event') : a.type}
                      </Badge>
                    </Table.Td>
                    <Table.Td>
                      {a.contact ? (
                        <Anchor component={Link} to={`/p/${projectId}/contacts/${a.contact.id}`}>
                          {a.contact.email}
                        </Anchor>
                      ) : (
                        '—'
                      )}
                    </Table.Td>
                    <Table.Td>
                      {a.emailId ? (
                        <Anchor component={Link} to={`/p/${projectId}/emails/${a.emailId}`} size="sm" lineClamp={1}>
                          {a.subject || 'View email'}
                        </Anchor>
                      ) : (
                        <Text size="sm" lineClamp={1}>
                          {a.subject ?? dataLine(a.data)}
                        </Text>
                      )}
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
          <LoadMore list={feed} label="Load older activity" centered />
        </>
      )}
    </>
  );
}
