import '@mantine/charts/styles.css';
import { AreaChart } from '@mantine/charts';
import { Anchor, Card, Group, SegmentedControl, Select, SimpleGrid, Stack, Table, Text, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { Link, useSearchParams } from 'react-router';
import { herald } from '../api.ts';
import { useProject } from '../components/ProjectLayout.tsx';
import { Empty, Loading, PageError, PageHeader } from '../components/states.tsx';
import { bucketLabel, startOfLastDays } from '../components/zoned.ts';
import { formatNumber, useProjectId } from '../hooks.ts';

/** GET /analytics/*: one page of charts and rankings over a chosen range (the range and metric live in the URL). */

const METRICS = ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained', 'unsubscribed'] as const;
type Metric = (typeof METRICS)[number];
const RANGES = [
  { value: '7', label: '7 days' },
  { value: '30', label: '30 days' },
  { value: '90', label: '90 days' },
  { value: '365', label: '1 year' },
];
const COLORS: Record<Metric, string> = {
  sent: 'blue.6',
  delivered: 'teal.6',
  opened: 'indigo.6',
  clicked: 'grape.6',
  bounced: 'red.6',
  complained: 'orange.6',
  unsubscribed: 'gray.6',
};
const label = (m: string) => m[0].toUpperCase() + m.slice(1);
/** Dashed where a line often equals the one drawn before it (delivered = sent), so neither hides the other. */
const DASHED: ReadonlySet<Metric> = new Set(['delivered', 'clicked', 'complained']);

export function AnalyticsPage() {
  const projectId = useProjectId();
  const { timezone } = useProject();
  const [params, setParams] = useSearchParams();
  const days = RANGES.some((r) => r.value === params.get('days')) ? params.get('days')! : '30';
  const metric: Metric | 'all' = (METRICS as readonly string[]).includes(params.get('metric') ?? '') ? (params.get('metric') as Metric) : 'all';
  const set = (key: string, value: string) => {
    const next = new URLSearchParams(params);
    next.set(key, value);
    setParams(next, { replace: true });
  };
  // Whole minutes, so every query of this render shares one range and caches well. The range
  // starts at the project's midnight, so "7 days" is 7 daily buckets (today's included).
  const to = new Date(Math.ceil(Date.now() / 60_000) * 60_000);
  const range = { from: startOfLastDays(to, Number(days), timezone).toISOString(), to: to.toISOString() };
  const interval = Number(days) > 90 ? 'week' : 'day';

  const series = useQuery({
    queryKey: [projectId, 'analytics', 'timeseries', days, metric, timezone],
    queryFn: () => herald.analytics.timeseries({ ...range, interval, metric: metric === 'all' ? undefined : metric }),
  });
  const campaigns = useQuery({
    queryKey: [projectId, 'analytics', 'top-campaigns', days, timezone],
    queryFn: () => herald.analytics.topCampaigns({ ...range, metric: 'opens', limit: 10 }),
  });
  const events = useQuery({
    queryKey: [projectId, 'analytics', 'top-events', days, timezone],
    queryFn: () => herald.analytics.topEvents({ ...range, limit: 10 }),
  });
  const shown = metric === 'all' ? METRICS : [metric];

  return (
    <Stack>
      <PageHeader title="Analytics">
        <SegmentedControl aria-label="Range" data={RANGES} value={days} onChange={(v) => set('days', v)} />
      </PageHeader>
      <Card withBorder padding="lg">
        <Group justify="space-between" mb="sm">
          <Title order={3} size="h4">
            Email outcomes
          </Title>
          <Select
            aria-label="Metric"
            size="xs"
            w={180}
            allowDeselect={false}
            value={metric}
            data={[{ value: 'all', label: 'All metrics' }, ...METRICS.map((m) => ({ value: m, label: label(m) }))]}
            onChange={(v) => v && set('metric', v)}
          />
        </Group>
        {series.isPending ? (
          <Loading />
        ) : series.error ? (
          <PageError error={series.error} onRetry={() => void series.refetch()} />
        ) : (
          <>
            <SimpleGrid cols={{ base: 2, sm: 4, md: 7 }} mb="md" data-testid="analytics-totals">
              {shown.map((m) => (
                <div key={m}>
                  <Text size="xs" c="dimmed" tt="uppercase" fw={600}>
                    {label(m)}
                  </Text>
                  <Text size="lg" fw={700} data-testid={`total-${m}`}>
                    {formatNumber(series.data.totals[m] ?? 0)}
                  </Text>
                </div>
              ))}
            </SimpleGrid>
            <AreaChart
              h={260}
              data={series.data.points.map((p) => ({ ...p, t: bucketLabel(p.t, interval, timezone) }))}
              dataKey="t"
              series={shown.map((m) => ({ name: m, label: label(m), color: COLORS[m], strokeDasharray: DASHED.has(m) ? '6 4' : undefined }))}
              curveType="monotone"
              withDots={false}
              withLegend
            />
          </>
        )}
      </Card>
      <SimpleGrid cols={{ base: 1, md: 2 }}>
        <Card withBorder padding="lg">
          <Title order={3} size="h4" mb="sm">
            Top campaigns
          </Title>
          {campaigns.isPending ? (
            <Loading />
          ) : campaigns.error ? (
            <PageError error={campaigns.error} onRetry={() => void campaigns.refetch()} />
          ) : campaigns.data.data.length === 0 ? (
            <Empty title="No campaigns sent in this range" />
          ) : (
            <Table.ScrollContainer minWidth={420}>
              <Table data-testid="top-campaigns">
                <Table.Thead>
                  <Table.Tr>
                    <Table.Th>Campaign</Table.Th>
                    <Table.Th ta="right">Sent</Table.Th>
                    <Table.Th ta="right">Open rate</Table.Th>
                    <Table.Th ta="right">Click rate</Table.Th>
                  </Table.Tr>
                </Table.Thead>
                <Table.Tbody>
                  {campaigns.data.data.map((c) => (
                    <Table.Tr key={c.id}>
                      <Table.Td>
                        <Anchor component={Link} to={`/p/${projectId}/campaigns/${c.id}/report`}>
                          {c.name}
                        </Anchor>
                      </Table.Td>
                      <Table.Td ta="right">{formatNumber(c.sent)}</Table.Td>
                      <Table.Td ta="right">{c.openRate}%</Table.Td>
                      <Table.Td ta="right">{c.clickRate}%</Table.Td>
                    </Table.Tr>
                  ))}
                </Table.Tbody>
              </Table>
            </Table.ScrollContainer>
          )}
        </Card>
        <Card withBorder padding="lg">
          <Title order={3} size="h4" mb="sm">
            Top events
          </Title>
          {events.isPending ? (
            <Loading />
          ) : events.error ? (
            <PageError error={events.error} onRetry={() => void events.refetch()} />
          ) : events.data.data.length === 0 ? (
            <Empty title="No tracked events in this range">Events sent with POST /v1/track show up here.</Empty>
          ) : (
            <Table data-testid="top-events">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Event</Table.Th>
                  <Table.Th ta="right">Count</Table.Th>
                  <Table.Th ta="right">Contacts</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {events.data.data.map((e) => (
                  <Table.Tr key={e.name}>
                    <Table.Td>{e.name}</Table.Td>
                    <Table.Td ta="right">{formatNumber(e.count)}</Table.Td>
                    <Table.Td ta="right">{formatNumber(e.uniqueContacts)}</Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          )}
        </Card>
      </SimpleGrid>
    </Stack>
  );
}

export default AnalyticsPage;
