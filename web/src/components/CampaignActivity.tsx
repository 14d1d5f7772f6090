import '@mantine/charts/styles.css';
import { AreaChart } from '@mantine/charts';
import { Card, SimpleGrid, Table, Text, Title } from '@mantine/core';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { herald } from '../api.ts';
import { formatNumber, useProjectId } from '../hooks.ts';
import { Empty, Loading, PageError } from './states.tsx';

/**
 * A sent campaign's opens and clicks over time and its clicks per link (GET /analytics/campaign-stats),
 * loaded with the report page's chart only (the charts library stays out of the first page).
 * `statsVersion` changes whenever the report's headline stats do, so the chart is fetched again and
 * never shows fewer sent than the numbers above it.
 */
const QUARTER_HOUR = 15 * 60_000;

export default function CampaignActivity({ campaignId, sentAt, statsVersion }: { campaignId: string; sentAt: string; statsVersion: string }) {
  const projectId = useProjectId();
  // On quarter hours: the API then sums the campaign's quarter-hour summaries and reads none of its emails.
  const from = new Date(Math.floor((new Date(sentAt).getTime() - 3_600_000) / QUARTER_HOUR) * QUARTER_HOUR);
  const to = new Date(Math.ceil(Date.now() / QUARTER_HOUR) * QUARTER_HOUR);
  const days = (to.getTime() - from.getTime()) / 86_400_000;
  // Hourly for the first days; daily after that, within the API's 366-day range.
  const interval = days <= 3 ? 'hour' : 'day';
  const start = days > 365 ? new Date(to.getTime() - 365 * 86_400_000) : from;
  const breakdown = useQuery({
    queryKey: [projectId, 'campaign-activity', campaignId, interval, statsVersion],
    queryFn: () => herald.analytics.campaign({ campaignId, interval, from: start.toISOString(), to: to.toISOString() }),
    placeholderData: keepPreviousData,
  });
  if (breakdown.isPending) return <Loading />;
  if (breakdown.error) return <PageError error={breakdown.error} onRetry={() => void breakdown.refetch()} />;
  const { series, links } = breakdown.data;
  const label = (t: string) =>
    interval === 'hour' ? new Date(t).toLocaleString([], { month: 'short', day: 'numeric', hour: '2-digit' }) : new Date(t).toLocaleDateString();
  return (
    <SimpleGrid cols={{ base: 1, md: 2 }}>
      <Card withBorder>
        <Title order={3} size="h4">
          Opens and clicks over time
        </Title>
        <Text size="sm" c="dimmed" mb="sm" data-testid="activity-totals">
          {formatNumber(series.totals.sent ?? 0)} sent · {formatNumber(series.totals.opened ?? 0)} opened · {formatNumber(series.totals.clicked ?? 0)} clicked
        </Text>
        <AreaChart
          h={220}
          data={series.points
            // The range ends on the next quarter hour, which may start a bucket that has not begun yet: not drawn as a zero.
            .filter((p) => Date.parse(p.t) <= Date.now())
            .map((p) => ({ t: label(p.t), sent: p.sent ?? 0, opened: p.opened ?? 0, clicked: p.clicked ?? 0 }))}
          dataKey="t"
          series={[
            { name: 'sent', label: 'Sent', color: 'blue.6' },
            { name: 'opened', label: 'Opened', color: 'indigo.6' },
            { name: 'clicked', label: 'Clicked', color: 'grape.6' },
          ]}
          curveType="monotone"
          withDots={false}
          withLegend
        />
      </Card>
      <Card withBorder>
        <Title order={3} size="h4" mb="sm">
          Clicks per link
        </Title>
        {links.length === 0 ? (
          <Empty title="No clicks yet" />
        ) : (
          <Table.ScrollContainer minWidth={360}>
            <Table data-testid="link-clicks">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Link</Table.Th>
                  <Table.Th ta="right">Clicks</Table.Th>
                  <Table.Th ta="right">Unique</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {links.map((l) => (
                  <Table.Tr key={l.url}>
                    <Table.Td>
                      <Text size="sm" lineClamp={1} style={{ wordBreak: 'break-all' }}>
                        {l.url}
                      </Text>
                    </Table.Td>
                    <Table.Td ta="right">{formatNumber(l.clicks)}</Table.Td>
                    <Table.Td ta="right">{formatNumber(l.uniqueClicks)}</Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
        )}
      </Card>
    </SimpleGrid>
  );
}
