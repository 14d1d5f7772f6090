import { Button, Card, Group, Modal, Stack, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useNavigate } from 'react-router';
import { herald } from '../api.ts';
import { formatNumber } from '../hooks.ts';
import type { Project } from '../types.ts';
import { notifySuccess, showApiError } from './forms.ts';

/**
 * A project's reset (POST /users/@me/projects/:id/reset) and delete (DELETE /users/@me/projects/:id),
 * each confirmed by typing the project's name. Shown to ADMINs and OWNERs.
 */

type Action = 'reset' | 'delete';

const WHAT: Record<Action, { title: string; button: string; explain: string }> = {
  reset: {
    title: 'Reset the project’s data?',
    button: 'Reset data',
    explain:
      'Deletes every contact, event, email, campaign, segment, workflow and template. Domains, members, API keys, settings and suppressions stay, and this month’s sending still counts against the caps. A big project takes a minute or more.',
  },
  delete: {
    title: 'Delete the project?',
    button: 'Delete project',
    explain:
      'Deletes the project and everything in it: its API keys stop working at once, queued and scheduled emails are never sent, and its hosted images stop showing in emails already sent.',
  },
};

/** "12 contacts, 3 emails" from a reset's answer; the tables with nothing deleted are left out. */
const summary = (deleted: Record<string, number>) =>
  Object.entries(deleted)
    .filter(([, n]) => n > 0)
    .map(([table, n]) => `${formatNumber(n)} ${table.replaceAll('_', ' ')}`)
    .join(', ') || 'nothing';

export function DangerZone({ project }: { project: Project }) {
  const queryClient = useQueryClient();
  const navigate = useNavigate();
  const [action, setAction] = useState<Action | null>(null);
  const [typed, setTyped] = useState('');
  const close = () => {
    setAction(null);
    setTyped('');
  };
  const reset = useMutation({
    mutationFn: () => herald.projects.reset(project.id),
    onSuccess: (r) => {
      close();
      // Every page of the project shows data that is gone.
      void queryClient.invalidateQueries({ queryKey: [project.id] });
      notifySuccess(`Project reset: deleted ${summary(r.deleted)}`);
    },
    onError: (err) => showApiError(err),
  });
  const remove = useMutation({
    mutationFn: () => herald.projects.delete(project.id),
    onSuccess: () => {
      close();
      queryClient.removeQueries({ queryKey: [project.id] });
      void queryClient.invalidateQueries({ queryKey: ['projects'] });
      notifySuccess(`Project ${project.name} deleted`);
      navigate('/projects', { replace: true });
    },
    onError: (err) => showApiError(err),
  });
  const running = action === 'reset' ? reset : remove;
  const what = action ? WHAT[action] : null;

  return (
    <Card withBorder style={{ borderColor: 'var(--mantine-color-red-3)' }}>
      <Stack gap="sm">
        <Title order={3} size="h4">
          Danger zone
        </Title>
        <Group justify="space-between" wrap="wrap">
          <Text size="sm" maw={560}>
            Reset the data: delete every contact, event, email, campaign, segment, workflow and template, and keep the domains, members, keys and settings.
          </Text>
          <Button color="red" variant="light" size="xs" onClick={() => setAction('reset')}>
            Reset data…
          </Button>
        </Group>
        <Group justify="space-between" wrap="wrap">
          <Text size="sm" maw={560}>
            Delete the project and everything in it.
          </Text>
          <Button color="red" variant="light" size="xs" onClick={() => setAction('delete')}>
            Delete project…
          </Button>
        </Group>
      </Stack>
      <Modal opened={what !== null} onClose={running.isPending ? () => undefined : close} title={what?.title} withCloseButton={!running.isPending}>
        {what && (
          <Stack>
            <Text size="sm">{what.explain}</Text>
            <TextInput
              label={`Type the project’s name, ${project.name}, to confirm`}
              value={typed}
              onChange={(e) => setTyped(e.currentTarget.value)}
              autoComplete="off"
              data-autofocus
            />
            <Group justify="flex-end">
              <Button variant="default" onClick={close} disabled={running.isPending}>
                Cancel
              </Button>
              <Button color="red" disabled={typed !== project.name} loading={running.isPending} onClick={() => running.mutate()}>
                {what.button}
              </Button>
            </Group>
          </Stack>
        )}
      </Modal>
    </Card>
  );
}
