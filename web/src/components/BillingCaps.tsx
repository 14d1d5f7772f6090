import { Badge, Button, Card, Group, NumberInput, Progress, SimpleGrid, Stack, Text, Title } from '@mantine/core';
import { useForm } from '@mantine/form';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect } from 'react';
import { herald } from '../api.ts';
import { formatDate, formatNumber } from '../hooks.ts';
import type { Project } from '../types.ts';
import { canManage } from './ProjectLayout.tsx';
import { notifySuccess, showApiError } from './forms.ts';
import { Loading, PageError } from './states.tsx';

const CATEGORIES = [
  ['transactional', 'Transactional'],
  ['campaigns', 'Campaigns'],
  ['workflows', 'Workflows'],
] as const;
type Category = (typeof CATEGORIES)[number][0];

type CategoryView = { limit: number | null; planLimit?: number | null; customLimit?: number | null };

/** The cap the form edits: the project's own (with Stripe billing the binding `limit` may be the plan's, which PUT must not copy). */
const ownCap = (l: CategoryView): number | '' => (l.customLimit !== undefined ? (l.customLimit ?? '') : (l.limit ?? ''));

/** With Stripe billing: the plan's cap under the input (the most the project's own cap may be). */
const planNote = (l: CategoryView): string | undefined =>
  l.planLimit === undefined ? undefined : l.planLimit === null ? 'Plan: no cap' : `Plan cap: ${formatNumber(l.planLimit)}`;

/**
 * Settings → Sending caps: this month's usage per category as bars, and the monthly caps (ADMIN and OWNER change them; empty means no
 * cap of the project's own). With Stripe billing the plan's caps are a ceiling, shown under each input.
 */
export function BillingCapsCard({ project }: { project: Project }) {
  const queryClient = useQueryClient();
  const mayManage = canManage(project);
  const key = [project.id, 'billing-limits'];
  const limits = useQuery({ queryKey: key, queryFn: () => herald.billing.limits(project.id) });
  const form = useForm<Record<Category, number | ''>>({ mode: 'controlled', initialValues: { transactional: '', campaigns: '', workflows: '' } });
  const loaded = limits.data;
  useEffect(() => {
    if (loaded && !form.initialized) form.initialize(Object.fromEntries(CATEGORIES.map(([c]) => [c, ownCap(loaded[c])])) as Record<Category, number | ''>);
  }, [loaded, form]);
  const save = useMutation({
    mutationFn: (v: Record<Category, number | ''>) =>
      herald.billing.setLimits(project.id, Object.fromEntries(CATEGORIES.map(([c]) => [c, v[c] === '' ? null : v[c]]))),
    onSuccess: (saved) => {
      queryClient.setQueryData(key, saved);
      form.resetDirty();
      notifySuccess('Sending caps saved');
    },
    onError: (err) => showApiError(err, form),
  });
  return (
    <Card withBorder>
      <Stack gap="md">
        <Group justify="space-between">
          <Title order={3} size="h4">
            Monthly sending caps
          </Title>
          {loaded && (
            <Text size="xs" c="dimmed">
              {formatDate(loaded.period.start)} – {formatDate(loaded.period.end)}
            </Text>
          )}
        </Group>
        {limits.isPending ? (
          <Loading />
        ) : limits.error ? (
          <PageError error={limits.error} onRetry={() => void limits.refetch()} />
        ) : (
          <form onSubmit={form.onSubmit((v) => save.mutate(v))} noValidate>
            <SimpleGrid cols={{ base: 1, sm: 3 }}>
              {CATEGORIES.map(([c, label]) => {
                const l = limits.data[c];
                return (
                  <Stack key={c} gap={6} data-testid={`cap-${c}`}>
                    <Group justify="space-between" gap="xs">
                      <Text size="sm" fw={500}>
                        {label}
                      </Text>
                      {l.isBlocked ? (
                        <Badge color="red" variant="light">
                          Cap reached
                        </Badge>
                      ) : l.isWarning ? (
                        <Badge color="orange" variant="light">
                          Near the cap
                        </Badge>
                      ) : null}
                    </Group>
                    <Progress value={l.percentage ?? 0} color={l.isBlocked ? 'red' : l.isWarning ? 'orange' : 'indigo'} aria-label={`${label} usage`} />
                    <Text size="xs" c="dimmed" data-testid={`usage-${c}`}>
                      {formatNumber(l.usage)} sent{l.limit === null ? ' · no cap' : ` of ${formatNumber(l.limit)}`}
                    </Text>
                    <NumberInput
                      label={`${label} cap`}
                      placeholder={l.planLimit != null ? "The plan's cap" : 'No cap'}
                      description={planNote(l)}
                      min={0}
                      max={l.planLimit ?? undefined}
                      allowDecimal={false}
                      allowNegative={false}
                      thousandSeparator=","
                      disabled={!mayManage}
                      {...form.getInputProps(c)}
                    />
                  </Stack>
                );
              })}
            </SimpleGrid>
            {mayManage && (
              <Group mt="md">
                <Button type="submit" loading={save.isPending} disabled={!form.isDirty()}>
                  Save caps
                </Button>
              </Group>
            )}
          </form>
        )}
      </Stack>
    </Card>
  );
}
