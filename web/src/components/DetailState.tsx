import { Button, Stack, Text, Title } from '@mantine/core';
import type { ReactNode } from 'react';
import { Link } from 'react-router';
import { isApiError } from '../api.ts';
import { Loading, PageError } from './states.tsx';

/** The lists whose items have a page of their own, and what one item is called. */
const ITEMS = {
  templates: 'Template',
  campaigns: 'Campaign',
  segments: 'Segment',
  contacts: 'Contact',
  emails: 'Email',
  workflows: 'Workflow',
} as const;

export type DetailList = keyof typeof ITEMS;

type DetailQuery = { data: unknown; error: unknown; isPending: boolean; refetch: () => Promise<unknown> };

/** A detail page whose id names nothing (404): asking again will not help, so it links back to its list. */
export function ItemNotFound({ projectId, list }: { projectId: string; list: DetailList }) {
  return (
    <Stack align="flex-start" py="xl" data-testid="item-not-found">
      <Title order={2}>{ITEMS[list]} not found</Title>
      <Text c="dimmed">There is no {ITEMS[list].toLowerCase()} with this id in this project. It may have been deleted, or the link may be wrong.</Text>
      <Button component={Link} to={`/p/${projectId}/${list}`}>
        Back to {list}
      </Button>
    </Stack>
  );
}

/**
 * What a detail page shows in place of its content until its query has data: loading, not found
 * (404), or the error with Try again. Null once there is data, also when a later refetch fails, so
 * a background read's error never replaces a page (and a form on it) that is already showing.
 */
export function detailState(query: DetailQuery, projectId: string, list: DetailList): ReactNode | null {
  if (query.data !== undefined) return null;
  if (query.isPending) return <Loading />;
  if (isApiError(query.error, 404)) return <ItemNotFound projectId={projectId} list={list} />;
  return <PageError error={query.error} onRetry={() => void query.refetch()} />;
}
