import '@mantine/core/styles.css';
import '@mantine/notifications/styles.css';
import { type CSSVariablesResolver, MantineProvider, createTheme } from '@mantine/core';
import { Notifications } from '@mantine/notifications';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { RouterProvider } from 'react-router';
import { setUnauthorizedHandler } from './api.ts';
import { retryDelayMs, retryQuery } from './query-retry.ts';
import { createRouter } from './router.tsx';
import { SessionExpiredModal, sessionEndedHandler } from './components/SessionExpired.tsx';
import { UnsavedChangesDialog } from './components/UnsavedChanges.tsx';

const queryClient = new QueryClient({
  defaultOptions: {
    queries: {
      staleTime: 10_000,
      retry: retryQuery,
      retryDelay: retryDelayMs,
    },
  },
});

const router = createRouter();

// A session that ends while the app is open asks to log in again over the page (SessionExpired.tsx).
setUnauthorizedHandler(sessionEndedHandler(queryClient));

// Shades dark enough for WCAG AA contrast on white (4.5:1): the primary colour's 8th shade and a
// darker "dimmed" grey than Mantine's default (the axe scan in test/dashboard.a11y.test.ts checks).
const theme = createTheme({
  primaryColor: 'indigo',
  primaryShade: { light: 8, dark: 6 },
  components: {
    // A table that scrolls sideways (on a phone) can be scrolled with the keyboard.
    TableScrollContainer: { defaultProps: { scrollAreaProps: { viewportProps: { tabIndex: 0 } } } },
    // The × of every dialog has a name for screen readers.
    Modal: { defaultProps: { closeButtonProps: { 'aria-label': 'Close' } } },
  },
  defaultRadius: 'md',
  fontFamily: 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif',
});

const cssVariablesResolver: CSSVariablesResolver = () => ({
  variables: {},
  light: {
    '--mantine-color-dimmed': 'var(--mantine-color-gray-7)',
    '--mantine-color-placeholder': 'var(--mantine-color-gray-6)',
    // The text of light badges (statuses) at 5:1 or more on their tinted background, striped rows
    // included: each colour's shade 9, darkened where that is not enough. The primary (indigo) and
    // gray already pass.
    '--mantine-color-blue-light-color': '#1864ab',
    '--mantine-color-grape-light-color': '#862e9c',
    '--mantine-color-green-light-color': '#247434',
    '--mantine-color-orange-light-color': '#b63c0d',
    '--mantine-color-red-light-color': '#bd2727',
    '--mantine-color-teal-light-color': '#077252',
    '--mantine-color-yellow-light-color': '#a15300',
  },
  dark: {},
});

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <MantineProvider theme={theme} cssVariablesResolver={cssVariablesResolver}>
      <Notifications position="top-right" />
      <QueryClientProvider client={queryClient}>
        <RouterProvider router={router} />
        <SessionExpiredModal router={router} />
        <UnsavedChangesDialog />
      </QueryClientProvider>
    </MantineProvider>
  </StrictMode>,
);
