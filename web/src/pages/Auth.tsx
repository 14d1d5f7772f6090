import { Anchor, Button, Center, Paper, PasswordInput, Stack, Text, TextInput, Title } from '@mantine/core';
import { useForm } from '@mantine/form';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { Link, useNavigate, useSearchParams } from 'react-router';
import { herald } from '../api.ts';
import { showApiError } from '../components/forms.ts';

/** Only same-app paths are followed after login (no open redirect). */
function safeNext(next: string | null): string {
  return next && next.startsWith('/') && !next.startsWith('//') ? next : '/';
}

function AuthForm({ mode }: { mode: 'login' | 'signup' }) {
  const navigate = useNavigate();
  const [params] = useSearchParams();
  const queryClient = useQueryClient();
  const form = useForm({
    mode: 'controlled',
    initialValues: { email: '', password: '' },
    validate: {
      email: (v) => (/^\S+@\S+$/.test(v) ? null : 'Enter your email address'),
      password: (v) => (mode === 'signup' && v.length < 8 ? 'Use at least 8 characters' : v ? null : 'Enter your password'),
    },
  });
  const submit = useMutation({
    mutationFn: (values: typeof form.values) => (mode === 'login' ? herald.auth.login(values) : herald.auth.signup(values)),
    onSuccess: (user) => {
      queryClient.setQueryData(['me'], user);
      void queryClient.invalidateQueries({ queryKey: ['projects'] });
      // A new account has no project yet, unless it came to accept an invitation (`next`).
      navigate(safeNext(params.get('next') ?? (mode === 'signup' ? '/projects' : null)), { replace: true });
    },
    onError: (err) => showApiError(err, form),
  });
  const title = mode === 'login' ? 'Log in to Herald' : 'Create your Herald account';
  // The other form keeps where to go afterwards.
  const keepNext = params.get('next') ? `?next=${encodeURIComponent(params.get('next')!)}` : '';
  return (
    <Center mih="100vh" p="md" bg="gray.0">
      <Paper withBorder shadow="sm" p="xl" w="100%" maw={400} component="main">
        <form onSubmit={form.onSubmit((v) => submit.mutate(v))} noValidate>
          <Stack>
            <Title order={1} size="h2">
              {title}
            </Title>
            <TextInput label="Email" type="email" autoComplete="email" required {...form.getInputProps('email')} />
            <PasswordInput
              label="Password"
              autoComplete={mode === 'login' ? 'current-password' : 'new-password'}
              required
              description={mode === 'signup' ? 'At least 8 characters' : undefined}
              {...form.getInputProps('password')}
            />
            <Button type="submit" loading={submit.isPending} fullWidth>
              {mode === 'login' ? 'Log in' : 'Sign up'}
            </Button>
            {mode === 'login' && (
              <Anchor component={Link} to="/forgot-password" size="sm" ta="center">
                Forgot your password?
              </Anchor>
            )}
            <Text size="sm" ta="center">
              {mode === 'login' ? (
                <>
                  New to Herald?{' '}
                  <Anchor component={Link} to={`/signup${keepNext}`}>
                    Create an account
                  </Anchor>
                </>
              ) : (
                <>
                  Already have an account?{' '}
                  <Anchor component={Link} to={`/login${keepNext}`}>
                    Log in
                  </Anchor>
                </>
              )}
            </Text>
          </Stack>
        </form>
      </Paper>
    </Center>
  );
}

export const LoginPage = () => <AuthForm mode="login" />;
export const SignupPage = () => <AuthForm mode="signup" />;
