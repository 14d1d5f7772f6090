import { Text } from '@mantine/core';
import { useDebouncedValue } from '@mantine/hooks';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { herald, isApiError } from '../api.ts';
import { formatNumber, useProjectId } from '../hooks.ts';
import type { Condition } from './ConditionBuilder.tsx';

/** The live count of a tree that is not saved yet: `POST /segments/count { condition }`, debounced. */
function useLiveCount(condition: Condition) {
  const projectId = useProjectId();
  const [debounced] = useDebouncedValue(JSON.stringify(condition), 400);
  return useQuery({
    queryKey: [projectId, 'segment-count', debounced],
    queryFn: () => herald.segments.count({ condition: JSON.parse(debounced) as Condition }),
    placeholderData: keepPreviousData,
    // A 429 (the project's other counts are running) is asked again after its wait: query-retry.ts.
    staleTime: 10_000,
  });
}

/**
 * What the live count says while a 429 is asked again: a wait of a second means the project's
 * other counts hold its slots; a longer one, that its counts took their share of the server lately.
 */
function countWaiting(retryAfter: unknown): string {
  if (typeof retryAfter !== 'number' || retryAfter <= 1) return 'Other counts of this project are running; trying again…';
  return `This project's counts took more than their share of the server lately; trying again in ${Math.min(retryAfter, 30)} s…`;
}

/** How many contacts an unsaved condition matches now (the segment editor, a campaign's filtered audience), with why it waits or what the server refused. */
export function LiveCount({ condition, fz = 32 }: { condition: Condition; fz?: number | string }) {
  const live = useLiveCount(condition);
  return (
    <>
      <Text fz={fz} fw={700} data-testid="live-count" aria-live="polite" style={{ opacity: live.isFetching ? 0.5 : 1 }}>
        {live.data ? formatNumber(live.data.count) : live.error ? '—' : '…'}
      </Text>
      {live.isFetching && isApiError(live.failureReason, 429) && (
        <Text size="xs" c="dimmed" data-testid="live-count-waiting">
          {countWaiting(live.failureReason.details?.retryAfter)}
        </Text>
      )}
      {live.error && (
        <Text size="xs" c="red" data-testid="live-count-error">
          {live.error.message}
        </Text>
      )}
    </>
  );
}
