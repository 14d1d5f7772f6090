import { Button, Group, Modal, Stack, Text } from '@mantine/core';
import { useCallback, useEffect, useMemo, useRef, useSyncExternalStore } from 'react';
import { useBlocker } from 'react-router';

/**
 * The unsaved-changes guard: a form that has changes not yet saved asks "Discard unsaved changes?"
 * before the app navigates to another page (a link, the sidebar, Back), and the browser asks before
 * a reload or closing the tab. One dialog for the whole app (`UnsavedChangesDialog`, in main.tsx);
 * the form calls `useUnsavedChangesGuard`.
 */

type Pending = { proceed: () => void; reset: () => void };

let pending: Pending | null = null;
let bypass = false;
const listeners = new Set<() => void>();

function setPending(next: Pending | null) {
  pending = next;
  for (const listener of listeners) listener();
}

/**
 * Navigates without asking (another account logged in: nothing of this one may stay on screen).
 * The router checks its blocker before its first await, so the flag only needs to hold for the call.
 */
export async function navigateDiscardingChanges(go: () => Promise<void>): Promise<void> {
  bypass = true;
  try {
    await go();
  } finally {
    bypass = false;
  }
}

/**
 * Guards the page while `isDirty()` is true. A function rather than a value: it is asked at the
 * moment of leaving, so a save's `onSuccess` that resets the form and then redirects (after a
 * create) is not stopped by the value of the last render. Changes of the query string only (a tab,
 * a filter on the same page) are not asked about.
 */
export function useUnsavedChangesGuard(isDirty: () => boolean): void {
  const dirty = useRef(isDirty);
  dirty.current = isDirty;
  const blocker = useBlocker(
    useCallback(
      ({ currentLocation, nextLocation }: { currentLocation: { pathname: string }; nextLocation: { pathname: string } }) =>
        !bypass && currentLocation.pathname !== nextLocation.pathname && dirty.current(),
      [],
    ),
  );
  useEffect(() => {
    if (blocker.state !== 'blocked') return;
    setPending({
      proceed: () => {
        setPending(null);
        blocker.proceed();
      },
      reset: () => {
        setPending(null);
        blocker.reset();
      },
    });
  }, [blocker]);
  useEffect(() => {
    const onBeforeUnload = (event: BeforeUnloadEvent) => {
      if (dirty.current()) event.preventDefault();
    };
    window.addEventListener('beforeunload', onBeforeUnload);
    return () => window.removeEventListener('beforeunload', onBeforeUnload);
  }, []);
}

const subscribe = (listener: () => void) => {
  listeners.add(listener);
  return () => listeners.delete(listener);
};

export function UnsavedChangesDialog() {
  const current = useSyncExternalStore(subscribe, () => pending);
  return (
    <Modal opened={current !== null} onClose={() => current?.reset()} title="Discard unsaved changes?" zIndex={400}>
      <Stack>
        <Text size="sm">This page has changes that are not saved. If you leave now, they are lost.</Text>
        <Group justify="flex-end">
          <Button variant="default" onClick={() => current?.reset()} data-autofocus>
            Keep editing
          </Button>
          <Button color="red" onClick={() => current?.proceed()}>
            Discard changes
          </Button>
        </Group>
      </Stack>
    </Modal>
  );
}

/**
 * For state kept outside a form (a segment's condition tree): `changed()` says whether `value`
 * differs, as JSON, from what it was when the page opened or at the last `reset()` (a save).
 */
export function useChanged<T>(value: T): { changed: () => boolean; reset: () => void } {
  const latest = useRef(value);
  latest.current = value;
  const saved = useRef(JSON.stringify(value));
  return useMemo(
    () => ({
      changed: () => JSON.stringify(latest.current) !== saved.current,
      reset: () => {
        saved.current = JSON.stringify(latest.current);
      },
    }),
    [],
  );
}
