import { Anchor, Badge, Card, Group, Table, Text, Title } from '@mantine/core';
import { useInfiniteQuery } from '@tanstack/react-query';
import { useEffect, useRef } from 'react';
import { Link } from 'react-router';
import { herald } from '../api.ts';
import { cursorPaging, formatDate, formatNumber, useProjectId } from '../hooks.ts';
import { EMAIL_STATUS_COLORS, EMAIL_STATUSES } from '../types.ts';
import { Empty, LoadMore, Loading, PageError } from './states.tsx';
import { StatusSelect, useUrlChoice } from './StatusSelect.tsx';

const PAGE_SIZE = 50;

/**
 * Emails with their status (GET /emails), newest first, 50 at a time: a campaign's recipients on its
 * report, or every email of the project on the Emails page (with their subjects). A status kept in
 * the URL's `param` narrows them; each address opens its email's page. While `live` (a campaign
 * sending) they are read again every 3 s, and once more when it ends.
 */
export function EmailList({
  title,
  param,
  campaignId,
  empty,
  live = false,
}: {
  title: string;
  param: string;
  campaignId?: string;
  empty: string;
  live?: boolean;
}) {
  const projectId = useProjectId();
  const [status, setStatus] = useUrlChoice(param, EMAIL_STATUSES);
  const emails = useInfiniteQuery({
    queryKey: [projectId, 'emails-list', campaignId ?? null, status],
    queryFn: ({ pageParam }) => herald.emails.list({ campaignId, status: status ?? undefined, limit: PAGE_SIZE, cursor: pageParam }),
    ...cursorPaging,
    refetchInterval: live ? 3_000 : false,
  });
  const wasLive = useRef(live);
  const { refetch } = emails;
  useEffect(() => {
    if (wasLive.current && !live) void refetch();
    wasLive.current = live;
  }, [live, refetch]);
  const items = emails.data?.pages.flatMap((p) => p.data) ?? [];
  const total = emails.data?.pages[0]?.total;
  const withSubject = campaignId === undefined;

  return (
    <Card withBorder>
      <Group justify="space-between" mb="sm">
        <Title order={3} size="h4">
          {title}
          {total !== undefined && (
            <Text span size="sm" c="dimmed" ml="xs" data-testid="email-list-total">
              {formatNumber(total)}
            </Text>
          )}
        </Title>
        <StatusSelect label="Email status" value={status} choices={EMAIL_STATUSES} onChange={setStatus} />
      </Group>
      {emails.isPending ? (
        <Loading />
      ) : emails.error ? (
        <PageError error={emails.error} onRetry={() => void emails.refetch()} />
      ) : items.length === 0 ? (
        <Empty title={status ? `No ${status.toLowerCase()} emails` : 'No emails yet'}>{status ? 'No email has this status now.' : empty}</Empty>
      ) : (
        <Table.ScrollContainer minWidth={640}>
          <Table data-testid="email-list">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Recipient</Table.Th>
                {withSubject && <Table.Th>Subject</Table.Th>}
                <Table.Th>Status</Table.Th>
                <Table.Th ta="right">Opens</Table.Th>
                <Table.Th ta="right">Clicks</Table.Th>
                <Table.Th>Sent</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {items.map((e) => (
                <Table.Tr key={e.id}>
                  <Table.Td>
                    <Anchor component={Link} to={`/p/${projectId}/emails/${e.id}`}>
                      {e.to}
                    </Anchor>
                  </Table.Td>
                  {withSubject && (
                    <Table.Td>
                      <Text size="sm" lineClamp={1}>
                        {e.subject}
                      </Text>
                    </Table.Td>
                  )}
                  <Table.Td>
                    <Badge color={EMAIL_STATUS_COLORS[e.status]} variant="light">
                      {e.status}
                    </Badge>
                    {e.error && (
                      <Text size="xs" c="dimmed" lineClamp={2}>
                        {e.error}
                      </Text>
                    )}
                  </Table.Td>
                  <Table.Td ta="right">{formatNumber(e.openCount)}</Table.Td>
                  <Table.Td ta="right">{formatNumber(e.clickCount)}</Table.Td>
                  <Table.Td>{formatDate(e.sentAt)}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
      <LoadMore list={emails} />
    </Card>
  );
}
