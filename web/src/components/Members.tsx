import { Badge, Button, Card, Group, Modal, Select, Stack, Table, Text, TextInput, Title } from '@mantine/core';
import { useForm } from '@mantine/form';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useNavigate } from 'react-router';
import { herald } from '../api.ts';
import { formatDate } from '../hooks.ts';
import type { Project } from '../types.ts';
import { canManage } from './ProjectLayout.tsx';
import { notifySuccess, showApiError } from './forms.ts';
import { useMe } from './RequireUser.tsx';
import { Loading, PageError } from './states.tsx';

/** The roles an invitation or a role change can give (OWNER stays with the project's creator). */
type GivenRole = 'ADMIN' | 'MEMBER';
const isGivenRole = (role: string | null): role is GivenRole => role === 'ADMIN' || role === 'MEMBER';

/** What a click on Leave, Remove or Revoke asks to confirm. */
type Pending = { kind: 'leave' | 'remove' | 'revoke'; id: string; email: string };

/** Settings → Members: who works on the project and with which role; ADMIN and OWNER invite, change roles and remove (the server enforces it). */
export function MembersCard({ project }: { project: Project }) {
  const queryClient = useQueryClient();
  const me = useMe();
  const mayManage = canManage(project);
  const navigate = useNavigate();
  const [pending, setPending] = useState<Pending | null>(null);
  const key = [project.id, 'members'];
  const list = useQuery({ queryKey: key, queryFn: () => herald.members.list(project.id) });
  const refresh = () => void queryClient.invalidateQueries({ queryKey: key });
  const form = useForm<{ email: string; role: GivenRole }>({ mode: 'controlled', initialValues: { email: '', role: 'MEMBER' } });
  const invite = useMutation({
    mutationFn: (v: typeof form.values) => herald.members.add(project.id, v),
    onSuccess: (_, v) => {
      refresh();
      form.reset();
      notifySuccess(`Invitation sent to ${v.email}`);
    },
    onError: (err) => showApiError(err, form),
  });
  const changeRole = useMutation({
    mutationFn: (m: { userId: string; role: GivenRole }) => herald.members.updateRole(project.id, m.userId, { role: m.role }),
    onSuccess: () => {
      refresh();
      notifySuccess('Role changed');
    },
    onError: (err) => showApiError(err),
  });
  const remove = useMutation({
    mutationFn: (m: Pending) => herald.members.remove(project.id, m.id),
    onSuccess: (_, m) => {
      setPending(null);
      if (m.kind === 'leave') {
        // The project is no longer ours: off its pages, and out of the switcher.
        queryClient.removeQueries({ queryKey: [project.id] });
        void queryClient.invalidateQueries({ queryKey: ['projects'] });
        navigate('/projects', { replace: true });
        notifySuccess(`You left ${project.name}`);
        return;
      }
      refresh();
      notifySuccess('Member removed');
    },
    onError: (err) => showApiError(err),
  });
  const revoke = useMutation({
    mutationFn: (id: string) => herald.members.revokeInvitation(project.id, id),
    onSuccess: () => {
      setPending(null);
      refresh();
      notifySuccess('Invitation revoked');
    },
    onError: (err) => showApiError(err),
  });

  return (
    <Card withBorder>
      <Stack gap="md">
        <Title order={3} size="h4">
          Members
        </Title>
        {list.isPending ? (
          <Loading />
        ) : list.error ? (
          <PageError error={list.error} onRetry={() => void list.refetch()} />
        ) : (
          <Table.ScrollContainer minWidth={520}>
            <Table data-testid="members">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Email</Table.Th>
                  <Table.Th>Role</Table.Th>
                  <Table.Th>Since</Table.Th>
                  <Table.Th />
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {list.data.members.map((m) => (
                  <Table.Tr key={m.userId}>
                    <Table.Td>{m.email}</Table.Td>
                    <Table.Td>
                      {mayManage && m.role !== 'OWNER' ? (
                        <Select
                          aria-label={`Role of ${m.email}`}
                          size="xs"
                          w={120}
                          allowDeselect={false}
                          data={['ADMIN', 'MEMBER']}
                          value={m.role}
                          onChange={(role) => isGivenRole(role) && role !== m.role && changeRole.mutate({ userId: m.userId, role })}
                        />
                      ) : (
                        <Badge variant="light">{m.role}</Badge>
                      )}
                    </Table.Td>
                    <Table.Td>{formatDate(m.createdAt)}</Table.Td>
                    <Table.Td>
                      {m.role !== 'OWNER' && (mayManage || m.userId === me.data?.id) && (
                        <Button
                          size="xs"
                          variant="subtle"
                          color="red"
                          onClick={() => setPending({ kind: m.userId === me.data?.id ? 'leave' : 'remove', id: m.userId, email: m.email })}
                        >
                          {m.userId === me.data?.id ? 'Leave' : 'Remove'}
                        </Button>
                      )}
                    </Table.Td>
                  </Table.Tr>
                ))}
                {list.data.invitations.map((i) => (
                  <Table.Tr key={i.id}>
                    <Table.Td>
                      {i.email}{' '}
                      <Text span size="xs" c="dimmed">
                        (invited, until {formatDate(i.expiresAt)})
                      </Text>
                    </Table.Td>
                    <Table.Td>
                      <Badge variant="outline">{i.role}</Badge>
                    </Table.Td>
                    <Table.Td>{formatDate(i.createdAt)}</Table.Td>
                    <Table.Td>
                      {mayManage && (
                        <Button size="xs" variant="subtle" color="red" onClick={() => setPending({ kind: 'revoke', id: i.id, email: i.email })}>
                          Revoke
                        </Button>
                      )}
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
        )}
        {mayManage && (
          <form onSubmit={form.onSubmit((v) => invite.mutate(v))} noValidate>
            <Group align="flex-end" gap="sm">
              <TextInput label="Invite by email" type="email" placeholder="colleague@example.com" w={280} {...form.getInputProps('email')} />
              <Select label="Role" w={130} allowDeselect={false} data={['MEMBER', 'ADMIN']} {...form.getInputProps('role')} />
              <Button type="submit" loading={invite.isPending}>
                Invite
              </Button>
            </Group>
            <Text size="xs" c="dimmed" mt={4}>
              Every address, with or without a Herald account, gets an email with a link valid 7 days; it joins when opened while signed in with that address.
            </Text>
          </form>
        )}
      </Stack>
      <Modal opened={pending !== null} onClose={() => setPending(null)} title={pending ? CONFIRM[pending.kind].title : ''}>
        {pending && (
          <Stack>
            <Text size="sm">{CONFIRM[pending.kind].text(pending.email, project.name)}</Text>
            <Group justify="flex-end">
              <Button variant="default" onClick={() => setPending(null)}>
                Cancel
              </Button>
              <Button
                color="red"
                loading={remove.isPending || revoke.isPending}
                onClick={() => (pending.kind === 'revoke' ? revoke.mutate(pending.id) : remove.mutate(pending))}
              >
                {CONFIRM[pending.kind].action}
              </Button>
            </Group>
          </Stack>
        )}
      </Modal>
    </Card>
  );
}

const CONFIRM: Record<Pending['kind'], { title: string; action: string; text: (email: string, project: string) => string }> = {
  leave: {
    title: 'Leave this project?',
    action: 'Leave project',
    text: (_, project) => `You lose access to ${project} at once. To come back, an admin has to invite you again.`,
  },
  remove: {
    title: 'Remove this member?',
    action: 'Remove member',
    text: (email, project) => `${email} loses access to ${project} at once. To come back, they need a new invitation.`,
  },
  revoke: {
    title: 'Revoke this invitation?',
    action: 'Revoke invitation',
    text: (email) => `The link sent to ${email} stops working. You can invite the address again later.`,
  },
};
