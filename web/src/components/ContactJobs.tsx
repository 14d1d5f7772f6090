import { Alert, Button, FileInput, Group, Modal, Progress, Stack, Table, Text } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { herald } from '../api.ts';
import { formatNumber, useProjectId } from '../hooks.ts';
import { notifySuccess, showApiError } from './forms.ts';

/**
 * The contacts page's two background jobs: a CSV import (POST /contacts/import, polled at
 * GET /contacts/import/:jobId) and bulk subscribe/unsubscribe/delete (POST /contacts/bulk-*,
 * polled at GET /contacts/bulk/:jobId). Both show a live progress bar until the job settles.
 */

const settled = (s: string | undefined) => s === 'completed' || s === 'failed';
const POLL_MS = 500;
const MAX_IMPORT_BYTES = 5 * 1024 * 1024;

const pct = (done: number, total: number) => (total > 0 ? Math.min(100, Math.round((done / total) * 100)) : 0);

/** Why a row was not imported, for each reason the import emits (src/modules/contacts/import/schemas.ts ImportReason). */
const IMPORT_REASONS: Record<string, string> = {
  missing_email: 'No email address',
  invalid_email: 'Not a valid email address',
  duplicate_email: 'The address is on a later row too (that row was imported)',
  too_many_columns: 'More cells than the header has columns',
  data_too_big: 'Its values are too large (256 KB a row, 1 MB a contact)',
  invalid_data: 'A value that cannot be stored (a NUL character)',
};

export function ImportModal({ opened, onClose }: { opened: boolean; onClose: () => void }) {
  const projectId = useProjectId();
  const queryClient = useQueryClient();
  const [file, setFile] = useState<File | null>(null);
  const [fileError, setFileError] = useState<string | null>(null);
  const [jobId, setJobId] = useState<string | null>(null);
  const upload = useMutation({
    mutationFn: (f: File) => {
      const form = new FormData();
      form.append('file', f, f.name);
      return herald.contacts.import(form);
    },
    onSuccess: (r) => setJobId(r.jobId),
    onError: (err) => showApiError(err),
  });
  const job = useQuery({
    queryKey: [projectId, 'import', jobId],
    queryFn: () => herald.contacts.importJob(jobId ?? ''),
    enabled: jobId !== null,
    refetchInterval: (q) => (settled(q.state.data?.status) ? false : POLL_MS),
  });
  const j = job.data;
  const done = settled(j?.status);
  // Once the job settles, the table and the field list show what it wrote.
  useEffect(() => {
    if (!done) return;
    void queryClient.invalidateQueries({ queryKey: [projectId, 'contacts'] });
    void queryClient.invalidateQueries({ queryKey: [projectId, 'contact-fields'] });
  }, [done, projectId, queryClient]);
  const close = () => {
    setFile(null);
    setFileError(null);
    setJobId(null);
    upload.reset();
    onClose();
  };
  const running = upload.isPending || (jobId !== null && !done);

  return (
    <Modal
      opened={opened}
      onClose={running ? () => undefined : close}
      withCloseButton={!running}
      closeOnEscape={!running}
      closeOnClickOutside={!running}
      title="Import contacts from CSV"
      size="lg"
    >
      <Stack>
        {jobId === null ? (
          <>
            <Text size="sm" c="dimmed">
              A header row with an <b>email</b> column; every other column becomes a custom field. Existing contacts are merged, new ones are created
              subscribed. At most 5 MB, UTF-8.
            </Text>
            <FileInput
              label="CSV file"
              accept=".csv,text/csv"
              clearable
              value={file}
              error={fileError}
              onChange={(f) => {
                setFile(f);
                setFileError(f && f.size > MAX_IMPORT_BYTES ? 'The file is larger than 5 MB' : null);
              }}
            />
            <Group justify="flex-end">
              <Button variant="default" onClick={close}>
                Cancel
              </Button>
              <Button disabled={!file || fileError !== null} loading={upload.isPending} onClick={() => file && upload.mutate(file)}>
                Import
              </Button>
            </Group>
          </>
        ) : (
          <>
            <Text size="sm" data-testid="import-progress-label">
              {!j || j.status === 'queued'
                ? 'Waiting to start…'
                : `${formatNumber(j.processedRows)} of ${formatNumber(j.totalRows)} rows${done ? '' : ' processed…'}`}
            </Text>
            <Progress
              value={j ? (done ? 100 : pct(j.processedRows, j.totalRows)) : 0}
              animated={!done}
              color={j?.status === 'failed' ? 'red' : done ? 'green' : 'indigo'}
              aria-label="Import progress"
              data-testid="import-progress"
            />
            {j?.status === 'failed' && (
              <Alert color="red" title="The import failed" role="alert">
                {j.failureReason}
              </Alert>
            )}
            {j?.status === 'completed' && (
              <>
                <Text size="sm" data-testid="import-summary">
                  Imported {formatNumber(j.imported)} new, updated {formatNumber(j.updated)}, skipped {formatNumber(j.skipped)}.
                </Text>
                {j.errorCount > 0 && (
                  <>
                    <Text size="sm" fw={600}>
                      {formatNumber(j.errorCount)} row{j.errorCount === 1 ? '' : 's'} not imported
                      {j.errors.length < j.errorCount ? ` (the first ${formatNumber(j.errors.length)} are listed)` : ''}
                    </Text>
                    <Table.ScrollContainer minWidth={360} mah={260}>
                      <Table data-testid="import-errors">
                        <Table.Thead>
                          <Table.Tr>
                            <Table.Th>Row</Table.Th>
                            <Table.Th>Email</Table.Th>
                            <Table.Th>Reason</Table.Th>
                          </Table.Tr>
                        </Table.Thead>
                        <Table.Tbody>
                          {j.errors.map((e) => (
                            <Table.Tr key={`${e.row}`}>
                              <Table.Td>{e.row}</Table.Td>
                              <Table.Td style={{ wordBreak: 'break-all' }}>{e.email || '—'}</Table.Td>
                              <Table.Td>{IMPORT_REASONS[e.reason] ?? e.reason}</Table.Td>
                            </Table.Tr>
                          ))}
                        </Table.Tbody>
                      </Table>
                    </Table.ScrollContainer>
                  </>
                )}
              </>
            )}
            <Group justify="flex-end">
              <Button onClick={close} disabled={!done}>
                Done
              </Button>
            </Group>
          </>
        )}
      </Stack>
    </Modal>
  );
}

export type BulkType = 'bulk-subscribe' | 'bulk-unsubscribe' | 'bulk-delete';

const VERB: Record<BulkType, { label: string; past: string; start: typeof herald.contacts.bulkDelete }> = {
  'bulk-subscribe': { label: 'Subscribe', past: 'subscribed', start: herald.contacts.bulkSubscribe },
  'bulk-unsubscribe': { label: 'Unsubscribe', past: 'unsubscribed', start: herald.contacts.bulkUnsubscribe },
  'bulk-delete': { label: 'Delete', past: 'deleted', start: herald.contacts.bulkDelete },
};

export const MAX_BULK = 1000;

/** The bar over the contacts table while rows are selected: the three actions, a confirmation for delete, the job's progress. */
export function BulkBar({ selected, onDone, onClear }: { selected: string[]; onDone: () => void; onClear: () => void }) {
  const projectId = useProjectId();
  const queryClient = useQueryClient();
  const [confirmDelete, setConfirmDelete] = useState(false);
  const [running, setRunning] = useState<{ jobId: string; type: BulkType } | null>(null);
  const start = useMutation({
    mutationFn: (type: BulkType) => VERB[type].start({ contactIds: selected }),
    onSuccess: (r, type) => {
      setConfirmDelete(false);
      setRunning({ jobId: r.jobId, type });
    },
    onError: (err) => {
      setConfirmDelete(false);
      showApiError(err);
    },
  });
  const job = useQuery({
    queryKey: [projectId, 'bulk', running?.jobId],
    queryFn: () => herald.contacts.bulkJob(running?.jobId ?? ''),
    enabled: running !== null,
    refetchInterval: (q) => (settled(q.state.data?.status) ? false : POLL_MS),
  });
  const j = job.data;
  useEffect(() => {
    if (!running || !j || j.jobId !== running.jobId || !settled(j.status)) return;
    const verb = VERB[running.type];
    setRunning(null);
    void queryClient.invalidateQueries({ queryKey: [projectId] });
    if (j.status === 'failed') showApiError(new Error(j.failureReason ?? 'The bulk operation failed'));
    else {
      const extra = [j.unchanged ? `${formatNumber(j.unchanged)} unchanged` : '', j.failed ? `${formatNumber(j.failed)} failed` : ''].filter(Boolean);
      notifySuccess(`${formatNumber(j.succeeded)} contact${j.succeeded === 1 ? '' : 's'} ${verb.past}${extra.length ? ` (${extra.join(', ')})` : ''}`);
    }
    onDone();
  }, [running, j, projectId, queryClient, onDone]);
  const busy = start.isPending || running !== null;
  const n = selected.length;

  return (
    <Stack gap={4} mb="sm" data-testid="bulk-bar">
      <Group gap="sm" wrap="wrap">
        <Text size="sm" fw={600}>
          {formatNumber(n)} selected
        </Text>
        <Button size="xs" variant="light" disabled={busy || n > MAX_BULK} onClick={() => start.mutate('bulk-subscribe')}>
          Subscribe
        </Button>
        <Button size="xs" variant="light" disabled={busy || n > MAX_BULK} onClick={() => start.mutate('bulk-unsubscribe')}>
          Unsubscribe
        </Button>
        <Button size="xs" variant="light" color="red" disabled={busy || n > MAX_BULK} onClick={() => setConfirmDelete(true)}>
          Delete…
        </Button>
        <Button size="xs" variant="subtle" disabled={busy} onClick={onClear}>
          Clear selection
        </Button>
        {n > MAX_BULK && (
          <Text size="xs" c="red">
            At most {formatNumber(MAX_BULK)} contacts at a time
          </Text>
        )}
      </Group>
      {running && (
        <>
          <Text size="xs" c="dimmed">
            {VERB[running.type].label}: {j ? `${formatNumber(j.processed)} of ${formatNumber(j.total)}` : 'starting…'}
          </Text>
          <Progress value={j ? pct(j.processed, j.total) : 0} animated aria-label="Bulk action progress" data-testid="bulk-progress" />
        </>
      )}
      <Modal opened={confirmDelete} onClose={() => setConfirmDelete(false)} title={`Delete ${formatNumber(n)} contact${n === 1 ? '' : 's'}?`}>
        <Stack>
          <Text size="sm">The selected contacts and their custom data are deleted permanently. This cannot be undone.</Text>
          <Group justify="flex-end">
            <Button variant="default" onClick={() => setConfirmDelete(false)}>
              Cancel
            </Button>
            <Button color="red" loading={start.isPending} onClick={() => start.mutate('bulk-delete')}>
              Delete {formatNumber(n)} contact{n === 1 ? '' : 's'}
            </Button>
          </Group>
        </Stack>
      </Modal>
    </Stack>
  );
}
