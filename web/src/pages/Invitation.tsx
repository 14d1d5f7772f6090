import { Anchor, Stack, Text, Title } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef } from 'react';
import { Link, Navigate, useSearchParams } from 'react-router';
import { herald } from '../api.ts';
import { notifySuccess } from '../components/forms.ts';
import { Loading } from '../components/states.tsx';

/**
 * /invitation?token=…: where the emailed invitation link sends a browser that was not signed in,
 * through the login or signup page. Accepts with the signed-in account and opens the project.
 */
export function InvitationPage() {
  const [params] = useSearchParams();
  const token = params.get('token') ?? '';
  const queryClient = useQueryClient();
  const accept = useMutation({
    mutationFn: () => herald.invitations.accept({ token }),
    onSuccess: (joined) => {
      void queryClient.invalidateQueries({ queryKey: ['projects'] });
      notifySuccess(`You joined the project as ${joined.role}`);
    },
  });
  // Once, however often the effect runs: a second accept of a used link would answer 400.
  const started = useRef(false);
  const { mutate } = accept;
  useEffect(() => {
    if (started.current) return;
    started.current = true;
    mutate();
  }, [mutate]);

  if (accept.isSuccess) return <Navigate to={`/p/${accept.data.projectId}`} replace />;
  if (!accept.isError) return <Loading />;
  return (
    <Stack p="xl" maw={520} mx="auto">
      <Title order={1} size="h2">
        This invitation could not be accepted
      </Title>
      <Text data-testid="invitation-error">{accept.error.message}</Text>
      <Anchor component={Link} to="/projects">
        Go to your projects
      </Anchor>
    </Stack>
  );
}
