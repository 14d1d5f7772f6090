import { useState } from 'react';
import { useParams } from 'react-router';
import { isApiError } from './api.ts';

/** The project id from the URL (/p/:projectId/...). */
export function useProjectId(): string {
  const { projectId } = useParams();
  if (!projectId) throw new Error('not on a project page');
  return projectId;
}

/** A cursor list's paging for useInfiniteQuery: the first page has no cursor, the next one the last page's while it has more. */
export const cursorPaging = {
  initialPageParam: undefined as string | undefined,
  getNextPageParam: (last: { hasMore: boolean; cursor?: string | null }) => (last.hasMore && last.cursor ? last.cursor : undefined),
};

export const formatDate = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '—');
export const formatNumber = (n: number) => n.toLocaleString();

/**
 * The page size of a page-numbered list, made smaller when the server says a page of it holds
 * more than a page may carry (a 422 on `pageSize` whose `details.pageSize` fits). Pass the list
 * query's error to `fit` on each render.
 */
export function useFittingPageSize(initial: number): [number, (error: unknown) => void] {
  const [size, setSize] = useState(initial);
  const fit = (error: unknown) => {
    if (!isApiError(error, 422) || error.errors?.[0]?.field !== 'pageSize') return;
    const named = error.details?.pageSize;
    if (typeof named === 'number' && named >= 1 && named < size) setSize(named);
  };
  return [size, fit];
}
