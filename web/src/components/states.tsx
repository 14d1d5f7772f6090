import { Alert, Button, Center, Group, Loader, Stack, Text, Title } from '@mantine/core';
import type { ReactNode } from 'react';
import { Link } from 'react-router';

/** The button under a cursor list (useInfiniteQuery) that fetches its next page; nothing once there is none. */
export function LoadMore({
  list,
  label = 'Load more',
  centered = false,
}: {
  list: { hasNextPage: boolean; isFetchingNextPage: boolean; fetchNextPage: () => Promise<unknown> };
  label?: string;
  centered?: boolean;
}) {
  if (!list.hasNextPage) return null;
  const button = (
    <Button mt={centered ? undefined : 'md'} variant="default" loading={list.isFetchingNextPage} onClick={() => void list.fetchNextPage()}>
      {label}
    </Button>
  );
  return centered ? <Center mt="md">{button}</Center> : button;
}

export function Loading({ label = 'Loading…' }: { label?: string }) {
  return (
    <Center py="xl" role="status" aria-live="polite" data-testid="loading">
      <Group gap="sm">
        <Loader size="sm" />
        <Text c="dimmed">{label}</Text>
      </Group>
    </Center>
  );
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return 'Something went wrong';
}

export function PageError({ error, onRetry }: { error: unknown; onRetry?: () => void }) {
  return (
    <Alert color="red" title="Could not load this page" role="alert">
      <Stack gap="xs">
        <Text size="sm">{errorMessage(error)}</Text>
        {onRetry && (
          <Group>
            <Button size="xs" variant="light" color="red" onClick={onRetry}>
              Try again
            </Button>
          </Group>
        )}
      </Stack>
    </Alert>
  );
}

export function Empty({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <Stack align="center" gap="xs" py="xl" data-testid="empty-state">
      <Text fw={600}>{title}</Text>
      {children && (
        <Text c="dimmed" size="sm" ta="center" maw={460}>
          {children}
        </Text>
      )}
    </Stack>
  );
}

export function NotFound() {
  return (
    <Stack align="center" py="xl">
      <Title order={2}>Page not found</Title>
      <Text c="dimmed">This page does not exist, or you do not have access to it.</Text>
      <Button component={Link} to="/">
        Go to the dashboard
      </Button>
    </Stack>
  );
}

export function PageHeader({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <Group justify="space-between" mb="md" wrap="wrap" gap="sm">
      <Title order={2}>{title}</Title>
      {children && <Group gap="sm">{children}</Group>}
    </Group>
  );
}
