import { Anchor, Badge, Card, Group, List, Stack, Text, ThemeIcon, Title, VisuallyHidden } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { lazy, Suspense } from 'react';
import { Link } from 'react-router';
import { herald } from '../api.ts';
import { useProject } from '../components/ProjectLayout.tsx';
import { Loading, PageError } from '../components/states.tsx';
import { useProjectId, useServerConfig } from '../hooks.ts';

// The small charts bring the charts library: loaded after the page, not with it.
const WeekSparklines = lazy(() => import('../components/WeekSparklines.tsx'));

export function HomePage() {
  const projectId = useProjectId();
  const project = useProject();
  const setup = useQuery({ queryKey: [projectId, 'setup-state'], queryFn: () => herald.projects.setupState(projectId) });
  const base = `/p/${projectId}`;
  const sandbox = useServerConfig().data?.sandboxDomain;

  const steps = setup.data
    ? [
        sandbox
          ? // While mail is captured a sent email shows a sender worked, from a domain or the sandbox.
            {
              done: setup.data.hasVerifiedDomain || setup.data.hasSentEmail,
              label: `Verify a sending domain, or send from any address @${sandbox} while mail is captured`,
              to: `${base}/domains`,
            }
          : { done: setup.data.hasVerifiedDomain, label: 'Verify a sending domain', to: `${base}/domains` },
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
