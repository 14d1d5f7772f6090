import { Alert, Button, Card, FileButton, Group, Image, Modal, Progress, SimpleGrid, Stack, Text } from '@mantine/core';
import { useInfiniteQuery, useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { herald } from '../api.ts';
import { cursorPaging, formatNumber, useProjectId } from '../hooks.ts';
import { Copy } from './Copy.tsx';
import { notifySuccess, showApiError } from './forms.ts';

/**
 * The project's hosted images (POST /uploads/image, GET /uploads, DELETE /uploads/*): upload one,
 * insert or copy its <img> tag into a message body, delete the ones no longer used, and see what
 * they use of the project's quota.
 */

const ACCEPTED = 'image/png,image/jpeg,image/gif,image/webp';
const MAX_IMAGE_BYTES = 10 * 1024 * 1024;
const PAGE = 24;

const MB = 1024 * 1024;
const size = (bytes: number) => (bytes >= MB ? `${(bytes / MB).toFixed(1)} MB` : `${Math.max(1, Math.round(bytes / 1024))} KB`);
/** What goes into the body: scales down on narrow screens, never up. */
export const imageTag = (url: string) => `<img src="${url}" alt="" style="max-width: 100%; height: auto;">`;

type Props = { opened: boolean; onClose: () => void; onInsert: (tag: string) => void };

export function ImageLibrary({ opened, onClose, onInsert }: Props) {
  const projectId = useProjectId();
  const queryClient = useQueryClient();
  const [confirming, setConfirming] = useState<string | null>(null);
  const queryKey = [projectId, 'uploads'];
  const images = useInfiniteQuery({
    queryKey,
    queryFn: ({ pageParam }) => herald.uploads.list({ limit: PAGE, cursor: pageParam }),
    ...cursorPaging,
    enabled: opened,
  });
  const refresh = () => queryClient.invalidateQueries({ queryKey });
  const upload = useMutation({
    mutationFn: (file: File) => {
      const form = new FormData();
      form.append('file', file, file.name);
      return herald.uploads.image(form);
    },
    onSuccess: () => {
      notifySuccess('Image uploaded');
      void refresh();
    },
    onError: (err) => showApiError(err),
  });
  const remove = useMutation({
    mutationFn: (key: string) => herald.uploads.delete(key),
    onSuccess: () => {
      setConfirming(null);
      notifySuccess('Image deleted');
      void refresh();
    },
    onError: (err) => showApiError(err),
  });
  const pick = (file: File | null) => {
    if (!file) return;
    if (file.size > MAX_IMAGE_BYTES) showApiError(new Error(`${file.name} is larger than 10 MB`));
    else upload.mutate(file);
  };

  const usage = images.data?.pages[0]?.usage;
  const list = images.data?.pages.flatMap((p) => p.data) ?? [];
  return (
    <Modal opened={opened} onClose={onClose} title="Images" size="xl">
      <Stack>
        <Group justify="space-between" wrap="wrap">
          <Text size="sm" c="dimmed" maw={520}>
            Hosted by Herald at a public address, for your emails. JPEG, PNG, GIF or WebP, up to 10 MB. An image deleted here stops showing in emails already
            sent.
          </Text>
          <FileButton onChange={pick} accept={ACCEPTED}>
            {(props) => (
              <Button {...props} loading={upload.isPending}>
                Upload image
              </Button>
            )}
          </FileButton>
        </Group>
        {usage && (
          <div>
            <Text size="xs" data-testid="uploads-usage">
              {size(usage.bytes)} of {size(usage.quotaBytes)} used · {formatNumber(usage.files)} of {formatNumber(usage.maxFiles)} images
            </Text>
            <Progress value={Math.min(100, (usage.bytes / usage.quotaBytes) * 100)} size="sm" aria-label="Upload quota used" />
          </div>
        )}
        {images.isError && (
          <Alert color="red" title="The images could not be loaded" role="alert">
            {images.error.message}
          </Alert>
        )}
        {images.isSuccess && list.length === 0 && (
          <Text size="sm" c="dimmed">
            No images yet.
          </Text>
        )}
        <SimpleGrid cols={{ base: 1, xs: 2, sm: 3 }}>
          {list.map((image) => (
            <Card key={image.key} withBorder padding="xs" data-testid="upload-card">
              <Card.Section>
                {/* From this server, whatever PUBLIC_URL names (the address emails use may not be reachable from here). */}
                <Image src={`/uploads/${image.key}`} alt="" h={120} fit="contain" bg="gray.1" loading="lazy" />
              </Card.Section>
              <Text size="xs" c="dimmed" mt="xs">
                {size(image.size)} · {new Date(image.createdAt).toLocaleDateString()}
              </Text>
              {confirming === image.key ? (
                <Group gap="xs" mt="xs">
                  <Text size="xs">Delete it?</Text>
                  <Button size="compact-xs" color="red" loading={remove.isPending} onClick={() => remove.mutate(image.key)}>
                    Delete
                  </Button>
                  <Button size="compact-xs" variant="default" onClick={() => setConfirming(null)}>
                    Keep
                  </Button>
                </Group>
              ) : (
                <Group gap="xs" mt="xs">
                  <Button
                    size="compact-xs"
                    onClick={() => {
                      onInsert(imageTag(image.url));
                      onClose();
                    }}
                  >
                    Insert
                  </Button>
                  <Copy value={image.url} label="Copy the address" />
                  <Button size="compact-xs" variant="subtle" color="red" onClick={() => setConfirming(image.key)}>
                    Delete
                  </Button>
                </Group>
              )}
            </Card>
          ))}
        </SimpleGrid>
        {images.hasNextPage && (
          <Group justify="center">
            <Button variant="default" loading={images.isFetchingNextPage} onClick={() => void images.fetchNextPage()}>
              More images
            </Button>
          </Group>
        )}
      </Stack>
    </Modal>
  );
}
