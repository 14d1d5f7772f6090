import { Alert, Anchor, Text } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { Link } from 'react-router';
import { herald, isApiError } from '../api.ts';
import { formatDate, useProjectId } from '../hooks.ts';
import type { Answer } from '../types.ts';

type Suppression = Answer<'suppressions.get'>;

const WHY: Record<Suppression['reason'], string> = {
  bounce: 'It bounced',
  complaint: 'Its recipient marked an email as spam',
  manual: 'It was suppressed by hand',
};

/**
 * On a contact's page: whether the project suppresses its address (GET /suppressions/:email; a 404
 * is "no"), since when and why, with the email that caused it. Nothing is shown otherwise. The key
 * sits under the suppressions list's, so a removal there refreshes it.
 */
export function SuppressionNotice({ email }: { email: string }) {
  const projectId = useProjectId();
  const suppression = useQuery({
    queryKey: [projectId, 'suppressions', 'one', email],
    queryFn: () =>
      herald.suppressions.get(email).catch((err: unknown) => {
        if (isApiError(err, 404)) return null;
        throw err;
      }),
  });
  const s = suppression.data;
  if (!s) return null;
  return (
    <Alert color="orange" title="Herald does not send to this address" data-testid="contact-suppressed">
      <Text size="sm">
        {WHY[s.reason]} on {formatDate(s.createdAt)}
        {s.emailId && (
          <>
            {' '}
            (
            <Anchor component={Link} to={`/p/${projectId}/emails/${s.emailId}`} size="sm">
              the email
            </Anchor>
            )
          </>
        )}
        , so every email to it is recorded as SUPPRESSED, whether the contact is subscribed or not. An admin can remove it from the{' '}
        <Anchor component={Link} to={`/p/${projectId}/suppressions?search=${encodeURIComponent(email)}`} size="sm">
          suppressions
        </Anchor>
        .
      </Text>
    </Alert>
  );
}
