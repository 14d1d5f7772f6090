import { ActionIcon, Button, Card, Code, Group, Modal, Select, Stack, Text, TextInput, Textarea, Title, Tooltip } from '@mantine/core';
import { useForm } from '@mantine/form';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { herald } from '../api.ts';
import { Copy } from '../components/Copy.tsx';
import { BillingCapsCard } from '../components/BillingCaps.tsx';
import { DangerZone } from '../components/DangerZone.tsx';
import { MembersCard } from '../components/Members.tsx';
import { canManage, useProject } from '../components/ProjectLayout.tsx';
import { notifySuccess, showApiError } from '../components/forms.ts';
import { PageHeader } from '../components/states.tsx';
import { SecretKeyModal } from '../components/SecretKeyModal.tsx';
import { useUnsavedChangesGuard } from '../components/UnsavedChanges.tsx';
import type { Project } from '../types.ts';

/** The IANA zones the browser knows, with UTC and the project's own zone (which the list may lack, e.g. an alias). */
function timeZones(current: string): string[] {
  return [...new Set(['UTC', current, ...Intl.supportedValuesOf('timeZone')])];
}

function KeyRow({ label, value, secret, help, mayRotate }: { label: string; value: string | null; secret: boolean; help: string; mayRotate: boolean }) {
  const [shown, setShown] = useState(!secret);
  return (
    <Stack gap={4}>
      <Text fw={500} size="sm">
        {label}
      </Text>
      <Text size="xs" c="dimmed">
        {help}
      </Text>
      {value ? (
        <Group gap="xs" wrap="nowrap">
          <Code data-testid={`key-${label.toLowerCase().replace(/\s+/g, '-')}`} style={{ wordBreak: 'break-all', flex: 1 }}>
            {shown ? value : `${value.slice(0, 3)}${'•'.repeat(24)}`}
          </Code>
          {secret && (
            <Tooltip label={shown ? 'Hide' : 'Reveal'}>
              <ActionIcon variant="default" aria-label={shown ? `Hide ${label}` : `Reveal ${label}`} onClick={() => setShown(!shown)}>
                {shown ? '◉' : '◎'}
              </ActionIcon>
            </Tooltip>
          )}
          <Copy value={value} label={`Copy ${label}`} />
        </Group>
      ) : (
        <Text size="sm" c="dimmed">
          {mayRotate
            ? 'Shown only when created or rotated. Rotate the keys to get a new one.'
            : 'Shown only when created or rotated, to the admin who did it. Ask an admin of the project for the key, or to rotate the keys.'}
        </Text>
      )}
    </Stack>
  );
}

export function SettingsPage() {
  const project = useProject();
  const queryClient = useQueryClient();
  const mayManage = canManage(project);
  const [confirmRotate, setConfirmRotate] = useState(false);
  const [rotated, setRotated] = useState<Project | null>(null);
  const [keyShown, setKeyShown] = useState(false);
  const form = useForm({
    mode: 'controlled',
    initialValues: {
      name: project.name,
      tracking: project.tracking,
      language: project.language,
      timezone: project.timezone,
      postalAddress: project.postalAddress ?? '',
    },
  });
  useUnsavedChangesGuard(() => form.isDirty());
  const save = useMutation({
    mutationFn: (v: typeof form.values) => herald.projects.update(project.id, v),
    onSuccess: () => {
      void queryClient.invalidateQueries({ queryKey: ['projects'] });
      form.resetDirty();
      notifySuccess('Settings saved');
    },
    onError: (err) => showApiError(err, form),
  });
  const rotate = useMutation({
    mutationFn: () => herald.projects.regenerateKeys(project.id),
    onSuccess: (p) => {
      setRotated(p);
      setConfirmRotate(false);
      setKeyShown(true);
      void queryClient.invalidateQueries({ queryKey: ['projects'] });
      notifySuccess('New keys issued; the old ones no longer work');
    },
    onError: (err) => showApiError(err),
  });
  const keys = rotated ?? project;
  return (
    <Stack>
      <PageHeader title="Settings" />
      <Card withBorder>
        <form onSubmit={form.onSubmit((v) => save.mutate(v))} noValidate>
          <Stack gap="sm" maw={520}>
            <Title order={3} size="h4">
              Project
            </Title>
            <TextInput label="Name" disabled={!mayManage} {...form.getInputProps('name')} />
            <Select
              label="Open and click tracking"
              allowDeselect={false}
              disabled={!mayManage}
              data={[
                { value: 'ENABLED', label: 'All email' },
                { value: 'MARKETING_ONLY', label: 'Marketing email only' },
                { value: 'DISABLED', label: 'Off' },
              ]}
              {...form.getInputProps('tracking')}
            />
            <TextInput
              label="Language"
              description="Default language of the unsubscribe footer and pages, e.g. en, de, fr"
              disabled={!mayManage}
              {...form.getInputProps('language')}
            />
            <Select
              label="Time zone"
              description="Analytics count days and weeks from midnight in this zone"
              searchable
              allowDeselect={false}
              nothingFoundMessage="No such time zone"
              disabled={!mayManage}
              data={timeZones(project.timezone)}
              {...form.getInputProps('timezone')}
            />
            <Textarea
              label="Postal address"
              description="Printed in the footer of marketing email, as bulk-mail rules in the US and EU expect"
              autosize
              minRows={2}
              maxLength={500}
              disabled={!mayManage}
              {...form.getInputProps('postalAddress')}
            />
            {mayManage && (
              <Group>
                <Button type="submit" loading={save.isPending} disabled={!form.isDirty()}>
                  Save
                </Button>
              </Group>
            )}
          </Stack>
        </form>
      </Card>
      <Card withBorder>
        <Stack gap="md">
          <Group justify="space-between">
            <Title order={3} size="h4">
              API keys
            </Title>
            {mayManage && (
              <Button color="red" variant="light" size="xs" onClick={() => setConfirmRotate(true)}>
                Rotate keys…
              </Button>
            )}
          </Group>
          <KeyRow
            label="Secret key"
            value={keys.secretKey}
            secret
            mayRotate={mayManage}
            help="For your servers: authenticates every API endpoint. Never ship it to a browser."
          />
          <KeyRow
            label="Public key"
            value={keys.publicKey}
            secret={false}
            mayRotate={mayManage}
            help="Safe in web pages and apps: only accepted by /v1/track."
          />
          <Text size="xs" c="dimmed">
            Project id: <Code>{project.id}</Code>
          </Text>
        </Stack>
      </Card>
      <MembersCard project={project} />
      <BillingCapsCard project={project} />
      {mayManage && <DangerZone project={project} />}
      <Modal opened={confirmRotate} onClose={() => setConfirmRotate(false)} title="Rotate both API keys?">
        <Stack>
          <Text size="sm">
            New secret and public keys are issued and the current ones stop working immediately, in every running process. Update your servers and pages right
            after.
          </Text>
          <Group justify="flex-end">
            <Button variant="default" onClick={() => setConfirmRotate(false)}>
              Cancel
            </Button>
            <Button color="red" loading={rotate.isPending} onClick={() => rotate.mutate()}>
              Rotate keys
            </Button>
          </Group>
        </Stack>
      </Modal>
      <SecretKeyModal secretKey={keyShown ? (rotated?.secretKey ?? null) : null} onClose={() => setKeyShown(false)} />
    </Stack>
  );
}
