import '@mantine/charts/styles.css';
import { Sparkline } from '@mantine/charts';
import { Paper, SimpleGrid, Text } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { herald } from '../api.ts';
import { formatNumber, useProjectId } from '../hooks.ts';
import { useProject } from './ProjectLayout.tsx';
import { Loading, PageError } from './states.tsx';
import { startOfLastDays } from './zoned.ts';

const METRICS = [
  ['sent', 'Sent', 'blue'],
  ['delivered', 'Delivered', 'teal'],
  ['opened', 'Opened', 'indigo'],
  ['clicked', 'Clicked', 'grape'],
  ['bounced', 'Bounced', 'red'],
] as const;

/** The home page's last 7 days: a total and a small daily chart per outcome (GET /analytics/timeseries; loaded with the home page's charts only). */
export default function WeekSparklines() {
  const projectId = useProjectId();
  const { timezone } = useProject();
  const to = new Date(Math.ceil(Date.now() / 60_000) * 60_000);
  const week = useQuery({
    queryKey: [projectId, 'analytics', 'week', timezone],
    // Today and the 6 days before it in the project's zone: 7 daily buckets.
    queryFn: () => herald.analytics.timeseries({ interval: 'day', from: startOfLastDays(to, 7, timezone).toISOString(), to: to.toISOString() }),
  });
  if (week.isPending) return <Loading />;
  if (week.error) return <PageError error={week.error} onRetry={() => void week.refetch()} />;
  return (
    <SimpleGrid cols={{ base: 2, sm: 5 }}>
      {METRICS.map(([key, label, color]) => (
        <Paper key={key} withBorder p="md">
          <Text size="xs" c="dimmed" tt="uppercase" fw={600}>
            {label}
          </Text>
          <Text size="xl" fw={700} data-testid={`week-${key}`}>
            {formatNumber(week.data.totals[key] ?? 0)}
          </Text>
          <div role="img" aria-label={`${label} per day`}>
            <Sparkline h={36} data={week.data.points.map((p) => p[key] ?? 0)} color={color} curveType="linear" fillOpacity={0.3} />
          </div>
        </Paper>
      ))}
    </SimpleGrid>
  );
}
