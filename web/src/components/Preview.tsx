import { Alert, Card, Group, Loader, SegmentedControl, Stack, Text } from '@mantine/core';
import { useDebouncedValue } from '@mantine/hooks';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { fieldErrors, herald, isApiError } from '../api.ts';
import { useProjectId } from '../hooks.ts';
import type { EmailType } from '../types.ts';
import { ContactPicker } from './ContactPicker.tsx';

/**
 * The server renders subject and body for the chosen contact (same sandbox and limits as a send);
 * the HTML shows in a sandboxed frame that can run no script.
 */
export function LivePreview({ subject, body, type }: { subject: string; body: string; type?: EmailType }) {
  const projectId = useProjectId();
  const [contactId, setContactId] = useState<string | null>(null);
  const [view, setView] = useState('html');
  const [input] = useDebouncedValue({ subject, body, contactId, type }, 400);
  const preview = useQuery({
    queryKey: [projectId, 'preview', input],
    queryFn: () => herald.templates.preview({ subject: input.subject, body: input.body, contactId: input.contactId ?? undefined, type: input.type }),
    enabled: input.body.length > 0 || input.subject.length > 0,
    placeholderData: keepPreviousData,
    // A 429 (other previews of the project or server are rendering) is asked again after its wait: query-retry.ts.
  });
  const errors = fieldErrors(preview.error);
  const waiting = preview.isFetching && isApiError(preview.failureReason, 429);
  return (
    <Card withBorder padding="sm" data-testid="preview">
      <Stack gap="xs">
        <Group justify="space-between" align="flex-end" wrap="wrap">
          <ContactPicker label="Preview as" value={contactId} onChange={setContactId} />
          <Group gap="xs">
            {waiting && (
              <Text size="xs" c="dimmed" data-testid="preview-waiting">
                Other previews are rendering; trying again…
              </Text>
            )}
            {preview.isFetching && <Loader size="xs" aria-label="Rendering" />}
            <SegmentedControl
              size="xs"
              value={view}
              onChange={setView}
              data={[
                { value: 'html', label: 'HTML' },
                { value: 'text', label: 'Text' },
              ]}
            />
          </Group>
        </Group>
        {preview.error ? (
          <Alert
            color={isApiError(preview.error, 429) ? 'yellow' : 'red'}
            title={isApiError(preview.error, 429) ? 'The server is busy rendering previews' : 'The template does not render'}
            data-testid="preview-error"
          >
            {errors.length > 0 ? errors.map((e) => <Text key={e.field + e.message} size="sm">{`${e.field}: ${e.message}`}</Text>) : preview.error.message}
            {isApiError(preview.error, 429) && (
              <Text size="sm" c="dimmed">
                The preview is tried again at your next change.
              </Text>
            )}
          </Alert>
        ) : null}
        {preview.data ? (
          <>
            <Text size="sm">
              <Text span fw={600}>
                Subject:
              </Text>{' '}
              <span data-testid="preview-subject">{preview.data.subject}</span>
            </Text>
            {view === 'html' ? (
              <iframe
                title="Email preview"
                sandbox=""
                srcDoc={preview.data.html}
                style={{ width: '100%', minHeight: 420, border: '1px solid var(--mantine-color-gray-3)', borderRadius: 6, background: 'white' }}
              />
            ) : (
              <Text component="pre" size="sm" style={{ whiteSpace: 'pre-wrap', minHeight: 420 }}>
                {preview.data.text}
              </Text>
            )}
          </>
        ) : !preview.error ? (
          <Text c="dimmed" size="sm">
            Write a subject or body to see the preview.
          </Text>
        ) : null}
      </Stack>
    </Card>
  );
}
