import { Button, Modal, PasswordInput, Stack, Text, TextInput } from '@mantine/core';
import { useForm } from '@mantine/form';
import { type QueryClient, useMutation, useQueryClient } from '@tanstack/react-query';
import { useEffect, useSyncExternalStore } from 'react';
import type { createBrowserRouter } from 'react-router';
import { herald, setProject, type UnauthorizedOutcome } from '../api.ts';
import type { Answer } from '../types.ts';
import { showApiError } from './forms.ts';
import { navigateDiscardingChanges } from './UnsavedChanges.tsx';

/**
 * An ended session, met while the app is open: the page stays as it is (a form keeps what was
 * typed) and a "log in again" dialog opens over it. Every request that met the 401 waits for the
 * dialog: logged in again as the same account, each is sent again (a Save goes through, a live
 * count or a report's polling carries on); as another account, they fail and the app goes to the
 * projects page, so nothing of the first account stays on screen; dismissed, they fail and the app
 * goes to the login page (asking first if a form has unsaved changes).
 */

type Router = ReturnType<typeof createBrowserRouter>;
type User = Answer<'users.me'>;

const AUTH_PAGES = ['/login', '/signup', '/forgot-password', '/reset-password'];

let waiting: ((outcome: UnauthorizedOutcome) => void)[] = [];
const listeners = new Set<() => void>();
const notify = () => listeners.forEach((listener) => listener());
const isOpen = () => waiting.length > 0;

function settle(outcome: UnauthorizedOutcome) {
  const resolved = waiting;
  waiting = [];
  notify();
  resolved.forEach((resolve) => resolve(outcome));
}

/** The path under /app (window.location: the router's own would not carry the basename). */
const appPath = () => window.location.pathname.replace(/^\/app(?=\/|$)/, '') || '/';

/** The handler api.ts asks on a 401 (see setUnauthorizedHandler). */
export function sessionEndedHandler(queryClient: QueryClient): () => Promise<UnauthorizedOutcome> {
  return () => {
    // Not signed in on this page load (a first visit without a cookie): RequireUser sends the
    // user to the login page, nothing typed can be lost.
    if (AUTH_PAGES.includes(appPath()) || queryClient.getQueryData(['me']) === undefined) return Promise.resolve('pass');
    return new Promise((resolve) => {
      waiting.push(resolve);
      if (waiting.length === 1) notify();
    });
  };
}

const subscribe = (listener: () => void) => {
  listeners.add(listener);
  return () => listeners.delete(listener);
};

export function SessionExpiredModal({ router }: { router: Router }) {
  const opened = useSyncExternalStore(subscribe, isOpen);
  const queryClient = useQueryClient();
  const previous = queryClient.getQueryData<User>(['me']);
  const form = useForm({
    mode: 'controlled',
    initialValues: { email: previous?.email ?? '', password: '' },
    validate: {
      email: (v) => (/^\S+@\S+$/.test(v) ? null : 'Enter your email address'),
      password: (v) => (v ? null : 'Enter your password'),
    },
  });
  useEffect(() => {
    if (opened) form.setValues({ email: previous?.email ?? '', password: '' });
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [opened]);

  const login = useMutation({
    mutationFn: (values: typeof form.values) => herald.auth.login(values),
    onSuccess: async (user) => {
      if (previous && user.id !== previous.id) {
        // Another account: what is on screen belongs to the first one.
        settle('fail');
        setProject(null);
        await navigateDiscardingChanges(() => router.navigate('/projects', { replace: true }));
        queryClient.clear();
        queryClient.setQueryData(['me'], user);
        return;
      }
      queryClient.setQueryData(['me'], user);
      settle('retry');
      // Reads that failed before this dialog opened (none wait for it) are read again.
      void queryClient.invalidateQueries({ predicate: (q) => q.state.status === 'error' });
    },
    onError: (err) => showApiError(err, form),
  });

  const dismiss = () => {
    settle('fail');
    const next = appPath() + window.location.search;
    // Through the router, so a form with unsaved changes asks first; the cache is dropped once the
    // login page is reached (another account may log in there).
    const from = router.state.location.pathname;
    const unsubscribe = router.subscribe((state) => {
      if (state.location.pathname === from) return;
      if (state.location.pathname === '/login') queryClient.clear();
      unsubscribe();
    });
    void router.navigate(`/login?next=${encodeURIComponent(next)}`, { replace: true });
  };

  return (
    <Modal opened={opened} onClose={dismiss} closeOnClickOutside={false} title="Your session ended — log in again" zIndex={300}>
      <form onSubmit={form.onSubmit((v) => login.mutate(v))} noValidate>
        <Stack>
          <Text size="sm">
            Log in to carry on: this page stays as it is, with what you typed, and what you were doing (a save, for example) goes through once you are back.
          </Text>
          <TextInput label="Email" type="email" autoComplete="email" required {...form.getInputProps('email')} />
          <PasswordInput label="Password" autoComplete="current-password" required data-autofocus {...form.getInputProps('password')} />
          <Button type="submit" loading={login.isPending} fullWidth>
            Log in
          </Button>
          <Button variant="subtle" onClick={dismiss}>
            Go to the login page
          </Button>
        </Stack>
      </form>
    </Modal>
  );
}
