import { Badge, Button, Card, Code, Group, Modal, Stack, Table, Text, TextInput, Title } from '@mantine/core';
import { useForm } from '@mantine/form';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { herald } from '../api.ts';
import { Copy } from '../components/Copy.tsx';
import { canManage, useProject } from '../components/ProjectLayout.tsx';
import { notifySuccess, showApiError } from '../components/forms.ts';
import { Empty, Loading, PageError, PageHeader } from '../components/states.tsx';
import { formatDate, useProjectId } from '../hooks.ts';
import type { Domain } from '../types.ts';

export function DomainStatus({ status }: { status: string }) {
  const color = status === 'verified' ? 'green' : status === 'pending' ? 'yellow' : 'red';
  return (
    <Badge color={color} variant="light" data-testid="domain-status">
      {status}
    </Badge>
  );
}

/** A domain's records and status; `mayManage` (ADMIN and OWNER) adds its Remove. */
function DomainCard({ domain, mayManage }: { domain: Domain; mayManage: boolean }) {
  const projectId = useProjectId();
  const queryClient = useQueryClient();
  const [confirm, setConfirm] = useState(false);
  const refresh = () => void queryClient.invalidateQueries({ queryKey: [projectId] });
  const verify = useMutation({
    mutationFn: () => herald.domains.verify(domain.id),
    onSuccess: (d) => {
      refresh();
      if (d.status === 'verified') notifySuccess(`${d.domain} is verified`);
      else showApiError(new Error(`${d.domain} is not verified yet: some required records were not found`));
    },
    onError: (err) => showApiError(err),
  });
  const remove = useMutation({
    mutationFn: () => herald.domains.delete(domain.id),
    onSuccess: refresh,
    onError: (err) => showApiError(err),
  });
  return (
    <Card withBorder data-testid={`domain-${domain.domain}`}>
      <Group justify="space-between" mb="sm" wrap="wrap">
        <Group gap="sm">
          <Title order={3} size="h4">
            {domain.domain}
          </Title>
          <DomainStatus status={domain.status} />
        </Group>
        <Group gap="xs">
          <Button size="xs" onClick={() => verify.mutate()} loading={verify.isPending}>
            Verify now
          </Button>
          {mayManage && (
            <Button size="xs" variant="subtle" color="red" onClick={() => setConfirm(true)}>
              Remove
            </Button>
          )}
        </Group>
      </Group>
      <Text size="xs" c="dimmed" mb="sm">
        {domain.status === 'verified'
          ? `Verified ${formatDate(domain.verifiedAt)}`
          : 'Publish these records at your DNS provider, then verify. Herald also re-checks pending domains every 5 minutes.'}
        {domain.lastCheckedAt ? ` · last checked ${formatDate(domain.lastCheckedAt)}` : ''}
      </Text>
      <Table.ScrollContainer minWidth={640}>
        <Table verticalSpacing="xs" fz="sm">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Type</Table.Th>
              <Table.Th>Name</Table.Th>
              <Table.Th>Value</Table.Th>
              <Table.Th>Purpose</Table.Th>
              <Table.Th>Found</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {domain.records.map((r) => (
              <Table.Tr key={`${r.type}|${r.name}|${r.value}`}>
                <Table.Td>{r.type}</Table.Td>
                <Table.Td>
                  <Group gap={6} wrap="nowrap" align="flex-start">
                    <Code style={{ wordBreak: 'break-all', flex: 1, minWidth: 120 }}>{r.name}</Code>
                    <Copy value={r.name} label={`Copy ${r.type} name`} />
                  </Group>
                </Table.Td>
                <Table.Td maw={360}>
                  <Group gap={6} wrap="nowrap" align="flex-start">
                    <Code style={{ wordBreak: 'break-all', maxHeight: 64, overflow: 'auto', flex: 1, minWidth: 160 }}>
                      {r.priority !== undefined ? `${r.priority} ` : ''}
                      {r.value}
                    </Code>
                    <Copy value={r.value} label={`Copy ${r.type} value`} />
                  </Group>
                </Table.Td>
                <Table.Td>
                  {r.purpose}
                  {!r.required && (
                    <Text span size="xs" c="dimmed">
                      {' '}
                      (optional)
                    </Text>
                  )}
                </Table.Td>
                <Table.Td>{r.found === undefined ? '—' : r.found ? '✓ yes' : '✗ no'}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </Table.ScrollContainer>
      <Modal opened={confirm} onClose={() => setConfirm(false)} title={`Remove ${domain.domain}?`}>
        <Stack>
          <Text size="sm">Herald stops sending from this domain. You can add it again later.</Text>
          <Group justify="flex-end">
            <Button variant="default" onClick={() => setConfirm(false)}>
              Cancel
            </Button>
            <Button color="red" loading={remove.isPending} onClick={() => remove.mutate()}>
              Remove domain
            </Button>
          </Group>
        </Stack>
      </Modal>
    </Card>
  );
}

export function DomainsPage() {
  const projectId = useProjectId();
  // Adding and removing a domain needs ADMIN: a MEMBER reads the records (and may check them).
  const mayManage = canManage(useProject());
  const queryClient = useQueryClient();
  const domains = useQuery({
    queryKey: [projectId, 'domains'],
    queryFn: () => herald.domains.list(projectId),
  });
  const form = useForm({ mode: 'controlled', initialValues: { domain: '' } });
  const add = useMutation({
    mutationFn: (v: { domain: string }) => herald.domains.create(v),
    onSuccess: () => {
      form.reset();
      void queryClient.invalidateQueries({ queryKey: [projectId] });
    },
    onError: (err) => showApiError(err, form),
  });
  return (
    <>
      <PageHeader title="Domains" />
      {mayManage && (
        <Card withBorder mb="lg">
          <form onSubmit={form.onSubmit((v) => add.mutate(v))} noValidate>
            <Group align="flex-start" wrap="wrap">
              <TextInput
                label="Sending domain"
                placeholder="mail.example.com"
                description="Emails are sent from addresses at this domain, signed with its DKIM key."
                w={{ base: '100%', sm: 380 }}
                {...form.getInputProps('domain')}
              />
              <Button type="submit" mt={{ base: 0, sm: 44 }} loading={add.isPending}>
                Add domain
              </Button>
            </Group>
          </form>
        </Card>
      )}
      {domains.isPending ? (
        <Loading />
      ) : domains.error ? (
        <PageError error={domains.error} onRetry={() => void domains.refetch()} />
      ) : domains.data.length === 0 ? (
        <Empty title="No domains yet">
          {mayManage ? 'Add the domain you send from; Herald shows the DNS records to publish.' : 'An admin of this project adds the domains it sends from.'}
        </Empty>
      ) : (
        <Stack>
          {domains.data.map((d) => (
            <DomainCard key={d.id} domain={d} mayManage={mayManage} />
          ))}
        </Stack>
      )}
    </>
  );
}
