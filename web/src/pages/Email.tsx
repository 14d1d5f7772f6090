import { Anchor, Badge, Card, Code, Group, ScrollArea, Stack, Table, Text, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { Link, useLocation, useNavigate, useParams } from 'react-router';
import { herald, isApiError } from '../api.ts';
import { Loading, PageError } from '../components/states.tsx';
import { detailState } from '../components/DetailState.tsx';
import { formatDate, useProjectId } from '../hooks.ts';
import { EMAIL_STATUS_COLORS } from '../types.ts';

/** One email: its status and what happened when (from GET /emails/:id), the SMTP answer of a failure, and the raw message when it was captured. */

/** An email that ended without going out (skipped, suppressed, failed): it has no message source. */
const neverSent = (e: { status: string; sentAt: string | null }) => !e.sentAt && ['SKIPPED', 'SUPPRESSED', 'FAILED'].includes(e.status);

export function EmailPage() {
  const projectId = useProjectId();
  const { emailId = '' } = useParams();
  // Opened from a list, a campaign's recipients, a contact or the feed: back goes there; opened by its URL, to the emails.
  const cameInApp = useLocation().key !== 'default';
  const navigate = useNavigate();
  const email = useQuery({ queryKey: [projectId, 'email', emailId], queryFn: () => herald.emails.get(emailId) });
  // The stored source exists only for captured mail (no SMTP_URL): 404 otherwise, shown as "not stored".
  const raw = useQuery({
    queryKey: [projectId, 'email-raw', emailId],
    queryFn: () =>
      herald.emails.raw(emailId).catch((err: unknown) => {
        if (isApiError(err, 404)) return null;
        throw err;
      }),
    enabled: email.isSuccess && !neverSent(email.data),
  });
  const state = detailState(email, projectId, 'emails');
  if (state || !email.data) return state;
  const e = email.data;
  const history = (
    [
      ['Queued', e.createdAt],
      ['Sent', e.sentAt],
      ['Delivered', e.deliveredAt],
      ['First opened', e.openedAt],
      ['First clicked', e.clickedAt],
      ['Bounced', e.bouncedAt],
      ['Complained', e.complainedAt],
    ] as const
  ).filter(([, at]) => at);
  return (
    <Stack>
      <div>
        <Anchor
          component={Link}
          to={`/p/${projectId}/emails`}
          size="sm"
          onClick={(ev) => {
            if (!cameInApp) return;
            ev.preventDefault();
            void navigate(-1);
          }}
        >
          ← {cameInApp ? 'Back' : 'Emails'}
        </Anchor>
        <Group gap="sm">
          <Title order={2}>{e.subject || '(no subject)'}</Title>
          <Badge color={EMAIL_STATUS_COLORS[e.status]} variant="light" data-testid="email-status">
            {e.status}
          </Badge>
        </Group>
        <Text size="sm" c="dimmed">
          To{' '}
          {e.contactId ? (
            <Anchor component={Link} to={`/p/${projectId}/contacts/${e.contactId}`} underline="always">
              {e.to}
            </Anchor>
          ) : (
            e.to
          )}{' '}
          from {e.fromName ? `${e.fromName} <${e.from}>` : e.from} · {e.type.toLowerCase()}
          {e.campaignId && (
            <>
              {' · '}
              <Anchor component={Link} to={`/p/${projectId}/campaigns/${e.campaignId}/report`} underline="always">
                campaign
              </Anchor>
            </>
          )}
          {e.workflowId && (
            <>
              {' · '}
              <Anchor component={Link} to={`/p/${projectId}/workflows/${e.workflowId}`} underline="always">
                workflow
              </Anchor>
            </>
          )}
        </Text>
      </div>
      {e.error && (
        <Card withBorder>
          <Text fw={600} size="sm">
            {e.status === 'BOUNCED' || e.status === 'FAILED' ? 'The server answered' : 'Last error'}
          </Text>
          <Code block data-testid="email-error">
            {e.error}
          </Code>
        </Card>
      )}
      <Card withBorder>
        <Title order={3} size="h4" mb="sm">
          What happened
        </Title>
        <Table data-testid="email-history">
          <Table.Tbody>
            {history.map(([label, at]) => (
              <Table.Tr key={label}>
                <Table.Td>{label}</Table.Td>
                <Table.Td>{formatDate(at)}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
        <Text size="xs" c="dimmed" mt="xs">
          {e.attempts} delivery attempt{e.attempts === 1 ? '' : 's'} · {e.openCount} open{e.openCount === 1 ? '' : 's'} · {e.clickCount} click
          {e.clickCount === 1 ? '' : 's'}
          {e.messageId ? ` · Message-ID ${e.messageId}` : ''}
        </Text>
      </Card>
      <Card withBorder>
        <Title order={3} size="h4" mb="sm">
          Message source
        </Title>
        {neverSent(e) ? (
          <Text size="sm" c="dimmed">
            This email was never sent ({e.status.toLowerCase()}), so there is no message source.
          </Text>
        ) : raw.isPending ? (
          <Loading />
        ) : raw.error ? (
          <PageError error={raw.error} onRetry={() => void raw.refetch()} />
        ) : raw.data === null ? (
          <Text size="sm" c="dimmed">
            Not stored: Herald keeps the source of captured mail only (when SMTP_URL is not set).
          </Text>
        ) : (
          <ScrollArea.Autosize mah={480} type="auto" viewportProps={{ tabIndex: 0, 'aria-label': 'Message source' }}>
            <Code block data-testid="email-raw">
              {raw.data}
            </Code>
          </ScrollArea.Autosize>
        )}
      </Card>
    </Stack>
  );
}
