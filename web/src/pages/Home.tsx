import { Anchor, Badge, Card, Group, List, Stack, Text, ThemeIcon, Title, VisuallyHidden } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { lazy, Suspense } from 'react';
import { Link } from 'react-router';
import { ApiError, api } from '../api.ts';
import { useProject } from '../components/ProjectLayout.tsx';
import { Loading, PageError } from '../components/states.tsx';
import { useProjectId } from '../hooks.ts';
import type { CursorPage, Contact, Domain, NumberedPage, Template } from '../types.ts';

// The small charts bring the charts library: loaded after the page, not with it.
const WeekSparklines = lazy(() => import('../components/WeekSparklines.tsx'));

type SetupState = { hasVerifiedDomain: boolean; contactCount: number; hasTemplate: boolean; hasSentEmail: boolean };
type ActivityStats = { total: number; counts: Record<string, number> };

/** `GET /projects/:id/setup-state` when the server has it; otherwise the same facts from the lists. */
async function loadSetupState(projectId: string): Promise<SetupState> {
  try {
    return await api.get<SetupState>(`/projects/${projectId}/setup-state`);
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 404)) throw err;
  }
  const [domains, contacts, templates, stats] = await Promise.all([
    api.get<Domain[]>(`/domains/project/${projectId}`),
    api.get<CursorPage<Contact>>('/contacts', { limit: 1 }),
    api.get<NumberedPage<Template>>('/templates', { pageSize: 1 }),
    api.get<ActivityStats>('/activity/stats'),
  ]);
  return {
    hasVerifiedDomain: domains.some((d) => d.status === 'verified'),
    contactCount: contacts.total ?? contacts.data.length,
    hasTemplate: templates.total > 0,
    hasSentEmail: (stats.counts['email.sent'] ?? 0) > 0,
  };
}

export function HomePage() {
  const projectId = useProjectId();
  const project = useProject();
  const setup = useQuery({ queryKey: [projectId, 'setup-state'], queryFn: () => loadSetupState(projectId) });
  const base = `/p/${projectId}`;

  const steps = setup.data
    ? [
        { done: setup.data.hasVerifiedDomain, label: 'Verify a sending domain', to: `${base}/domains` },
        { done: setup.data.contactCount > 0, label: 'Add your first contacts', to: `${base}/contacts` },
        { done: setup.data.hasTemplate, label: 'Write a template', to: `${base}/templates/new` },
        { done: setup.data.hasSentEmail, label: 'Send your first email', to: `${base}/campaigns/new` },
      ]
    : [];
  const remaining = steps.filter((s) => !s.done).length;

  return (
    <Stack>
      <Title order={2}>{project.name}</Title>
      <Card withBorder padding="lg" data-testid="onboarding">
        <Group justify="space-between" mb="sm">
          <Title order={3} size="h4">
            Get started
          </Title>
          {setup.data && (
            <Badge color={remaining === 0 ? 'green' : 'gray'} variant="light">
              {steps.length - remaining} of {steps.length} done
            </Badge>
          )}
        </Group>
        {setup.isPending ? (
          <Loading />
        ) : setup.error ? (
          <PageError error={setup.error} onRetry={() => void setup.refetch()} />
        ) : (
          <List spacing="sm" listStyleType="none">
            {steps.map((s) => (
              <List.Item
                key={s.label}
                icon={
                  <ThemeIcon color={s.done ? 'green' : 'gray'} variant={s.done ? 'filled' : 'light'} radius="xl" size={22} aria-hidden>
                    {s.done ? '✓' : '·'}
                  </ThemeIcon>
                }
              >
                {s.done ? (
                  <Text td="line-through" c="dimmed">
                    {s.label} <VisuallyHidden>(done)</VisuallyHidden>
                  </Text>
                ) : (
                  <Anchor component={Link} to={s.to}>
                    {s.label}
                  </Anchor>
                )}
              </List.Item>
            ))}
          </List>
        )}
      </Card>
      <Title order={3} size="h4">
        Last 7 days
      </Title>
      <Suspense fallback={<Loading />}>
        <WeekSparklines />
      </Suspense>
    </Stack>
  );
}
