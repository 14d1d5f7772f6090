import { Button, Code, Group, Modal, Stack, Text } from '@mantine/core';
import { Copy } from './Copy.tsx';

/**
 * A project's secret API key, shown once: the API answers it in clear only when the key is created
 * or rotated, so this is the one chance to copy it.
 */
export function SecretKeyModal({ secretKey, onClose }: { secretKey: string | null; onClose: () => void }) {
  return (
    <Modal opened={secretKey !== null} onClose={onClose} title="Your secret API key" closeOnClickOutside={false}>
      <Stack>
        <Group gap="xs" wrap="nowrap">
          <Code data-testid="new-secret-key" style={{ wordBreak: 'break-all', flex: 1 }}>
            {secretKey}
          </Code>
          <Copy value={secretKey ?? ''} label="Copy secret key" />
        </Group>
        <Text size="sm">Copy it now: it will not be shown again. It authenticates every API endpoint, so keep it on your servers, never in a browser.</Text>
        <Group justify="flex-end">
          <Button onClick={onClose}>I have copied it</Button>
        </Group>
      </Stack>
    </Modal>
  );
}
