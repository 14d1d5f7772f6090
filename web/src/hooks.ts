import { useDebouncedValue } from '@mantine/hooks';
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { useParams, useSearchParams } from 'react-router';
import { herald, isApiError } from './api.ts';

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

/**
 * A search box whose term lives in the URL's `search` parameter: `[text, setText, term]`. The
 * term follows the text (trimmed) 300 ms after typing stops. A URL changed from outside (the
 * sidebar's link to the page, the back button) puts its term in the box rather than being written
 * over by the box's old text. `onTermChange` runs whenever the term changes (to reset paging or a
 * selection).
 */
export function useUrlSearch(onTermChange?: () => void): [string, (text: string) => void, string] {
  const [params, setParams] = useSearchParams();
  const term = params.get('search') ?? '';
  const [text, setText] = useState(term);
  const [settled] = useDebouncedValue(text.trim(), 300);
  // The term on the last render, and the one the box last asked the URL for: a term that changed
  // to anything else came from outside.
  const [seen, setSeen] = useState({ term, asked: term });
  if (term !== seen.term) {
    setSeen({ term, asked: term });
    if (term !== seen.asked) setText(term);
    onTermChange?.();
  } else if (settled === text.trim() && settled !== term && settled !== seen.asked) {
    const next = withoutCursors(params);
    if (settled) next.set('search', settled);
    else next.delete('search');
    setParams(next, { replace: true });
    setSeen({ term, asked: settled });
  }
  return [text, setText, term];
}

const CURSOR_PARAM = 'cursor';
/** Cursors kept in the URL: Previous works back this many pages, then goes to the first page. */
const KEPT_CURSORS = 20;

/** A copy of the URL's parameters without the list's paging (a new search or filter starts on page 1). */
export function withoutCursors(params: URLSearchParams): URLSearchParams {
  const next = new URLSearchParams(params);
  next.delete(CURSOR_PARAM);
  return next;
}

/**
 * The paging of a cursor list shown one page at a time, in the URL: the cursors of the pages
 * opened with Next, oldest first (repeated `cursor` parameters; the last is this page's, none on
 * the first page). Reload keeps the page; each Next and Previous is a history entry, so Back and
 * Forward move between pages. A change of the search term (useUrlSearch) drops them.
 */
export function useUrlCursors(): { cursor: string | undefined; hasPrevious: boolean; next: (cursor: string) => void; previous: () => void } {
  const [params, setParams] = useSearchParams();
  const cursors = params.getAll(CURSOR_PARAM);
  const go = (list: string[]) => {
    const next = withoutCursors(params);
    for (const c of list.slice(-KEPT_CURSORS)) next.append(CURSOR_PARAM, c);
    setParams(next);
  };
  return {
    cursor: cursors[cursors.length - 1],
    hasPrevious: cursors.length > 0,
    next: (cursor) => go([...cursors, cursor]),
    previous: () => go(cursors.slice(0, -1)),
  };
}

/** The server's public configuration (GET /config): read once per page load. */
export const useServerConfig = () => useQuery({ queryKey: ['config'], queryFn: () => herald.meta.config(), staleTime: Infinity });
