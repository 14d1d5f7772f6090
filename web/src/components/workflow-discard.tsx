import { Button, Group, Modal, Stack, Text } from '@mantine/core';
import { type ReactNode, useRef, useState } from 'react';

/**
 * A modal form's close (Escape, the ×, a click outside) that asks before dropping typed changes.
 * The form inside sets `isDirty.current`; `requestClose` closes at once when it is clean and asks
 * `question` otherwise. The form's own Cancel button closes without asking (an explicit choice).
 */
export function useDiscardConfirm(onClose: () => void, question: string): { isDirty: { current: () => boolean }; requestClose: () => void; dialog: ReactNode } {
  const isDirty = useRef<() => boolean>(() => false);
  const [asking, setAsking] = useState(false);
  const requestClose = () => {
    if (isDirty.current()) setAsking(true);
    else onClose();
  };
  const dialog = (
    <Modal opened={asking} onClose={() => setAsking(false)} title={question} zIndex={400}>
      <Stack>
        <Text size="sm">What you typed in this form is not saved. If you close it now, it is lost.</Text>
        <Group justify="flex-end">
          <Button variant="default" onClick={() => setAsking(false)} data-autofocus>
            Keep editing
          </Button>
          <Button
            color="red"
            onClick={() => {
              setAsking(false);
              onClose();
            }}
          >
            Discard changes
          </Button>
        </Group>
      </Stack>
    </Modal>
  );
  return { isDirty, requestClose, dialog };
}
