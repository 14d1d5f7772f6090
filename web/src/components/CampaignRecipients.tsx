import { Anchor, Badge, Button, Card, Group, Table, Text, Title } from '@mantine/core';
import { useInfiniteQuery } from '@tanstack/react-query';
import { Link } from 'react-router';
import { herald } from '../api.ts';
import { formatDate, formatNumber, useProjectId } from '../hooks.ts';
import { EMAIL_STATUS_COLORS, EMAIL_STATUSES } from '../types.ts';
import { Empty, Loading, PageError } from './states.tsx';
import { StatusSelect, useUrlChoice } from './StatusSelect.tsx';

const PAGE_SIZE = 50;

/**
 * A campaign report's recipients: each email of the campaign with its status (GET /emails?campaignId=),
 * newest first, 50 at a time, filtered by a status kept in the URL (`?recipients=BOUNCED`); each
 * address opens its email's page.
 */
export function CampaignRecipients({ campaignId }: { campaignId: string }) {
  const projectId = useProjectId();
  const [status, setStatus] = useUrlChoice('recipients', EMAIL_STATUSES);
  const emails = useInfiniteQuery({
    queryKey: [projectId, 'campaign-emails', campaignId, status],
    queryFn: ({ pageParam }) => herald.emails.list({ campaignId, status: status ?? undefined, limit: PAGE_SIZE, cursor: pageParam }),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (last) => (last.hasMore && last.cursor ? last.cursor : undefined),
  });
  const items = emails.data?.pages.flatMap((p) => p.data) ?? [];
  const total = emails.data?.pages[0]?.total;

  return (
    <Card withBorder>
      <Group justify="space-between" mb="sm">
        <Title order={3} size="h4">
          Recipients
          {total !== undefined && (
            <Text span size="sm" c="dimmed" ml="xs" data-testid="recipients-total">
              {formatNumber(total)}
            </Text>
          )}
        </Title>
        <StatusSelect label="Recipient status" value={status} choices={EMAIL_STATUSES} onChange={setStatus} />
      </Group>
      {emails.isPending ? (
        <Loading />
      ) : emails.error ? (
        <PageError error={emails.error} onRetry={() => void emails.refetch()} />
      ) : items.length === 0 ? (
        <Empty title={status ? `No ${status.toLowerCase()} emails` : 'No emails yet'}>
          {status ? 'None of this campaign’s emails has this status now.' : 'Each recipient’s email appears here as the campaign goes out.'}
        </Empty>
      ) : (
        <Table.ScrollContainer minWidth={640}>
          <Table data-testid="campaign-recipients">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Recipient</Table.Th>
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
      {emails.hasNextPage && (
        <Button mt="md" variant="default" loading={emails.isFetchingNextPage} onClick={() => void emails.fetchNextPage()}>
          Load more
        </Button>
      )}
    </Card>
  );
}
