import { Anchor, Button, Center, Paper, PasswordInput, Stack, Text, TextInput, Title } from '@mantine/core';
import { useForm } from '@mantine/form';
import { useMutation } from '@tanstack/react-query';
import type { ReactNode } from 'react';
import { Link, useNavigate, useSearchParams } from 'react-router';
import { herald } from '../api.ts';
import { notifySuccess, showApiError } from '../components/forms.ts';

function Frame({ title, children }: { title: string; children: ReactNode }) {
  return (
    <Center mih="100vh" p="md" bg="gray.0">
      <Paper withBorder shadow="sm" p="xl" w="100%" maw={400} component="main">
        <Stack>
          <Title order={1} size="h2">
            {title}
          </Title>
          {children}
        </Stack>
      </Paper>
    </Center>
  );
}

export function ForgotPasswordPage() {
  const form = useForm({ mode: 'controlled', initialValues: { email: '' } });
  const request = useMutation({
    mutationFn: (v: { email: string }) => herald.auth.requestPasswordReset(v),
    onError: (err) => showApiError(err, form),
  });
  return (
    <Frame title="Reset your password">
      {request.isSuccess ? (
        <Text size="sm" data-testid="reset-requested">
          If an account exists for {form.values.email}, an email with a reset link is on its way. The link works for an hour.
        </Text>
      ) : (
        <form onSubmit={form.onSubmit((v) => request.mutate(v))} noValidate>
          <Stack>
            <TextInput label="Email" type="email" autoComplete="email" required {...form.getInputProps('email')} />
            <Button type="submit" loading={request.isPending}>
              Email me a reset link
            </Button>
          </Stack>
        </form>
      )}
      <Anchor component={Link} to="/login" size="sm" ta="center">
        Back to log in
      </Anchor>
    </Frame>
  );
}

export function ResetPasswordPage() {
  const [params] = useSearchParams();
  const navigate = useNavigate();
  const token = params.get('token') ?? '';
  const form = useForm({ mode: 'controlled', initialValues: { password: '' } });
  const reset = useMutation({
    mutationFn: (v: { password: string }) => herald.auth.resetPassword({ token, password: v.password }),
    onSuccess: () => {
      notifySuccess('Password changed: log in with your new password');
      navigate('/login', { replace: true });
    },
    onError: (err) => showApiError(err, form),
  });
  return (
    <Frame title="Choose a new password">
      {!token ? (
        <Text size="sm">This link is incomplete. Ask for a new one from the log-in page.</Text>
      ) : (
        <form onSubmit={form.onSubmit((v) => reset.mutate(v))} noValidate>
          <Stack>
            <PasswordInput label="New password" autoComplete="new-password" description="At least 8 characters" required {...form.getInputProps('password')} />
            <Button type="submit" loading={reset.isPending}>
              Set password
            </Button>
          </Stack>
        </form>
      )}
    </Frame>
  );
}
