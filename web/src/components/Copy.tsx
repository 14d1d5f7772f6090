import { Button, CopyButton, Tooltip } from '@mantine/core';

export function Copy({ value, label = 'Copy' }: { value: string; label?: string }) {
  return (
    <CopyButton value={value} timeout={1500}>
      {({ copied, copy }) => (
        <Tooltip label={copied ? 'Copied' : label} withArrow>
          <Button
            size="compact-xs"
            variant={copied ? 'filled' : 'light'}
            color={copied ? 'teal' : undefined}
            onClick={copy}
            aria-label={label}
            style={{ flexShrink: 0 }}
          >
            {copied ? 'Copied' : 'Copy'}
          </Button>
        </Tooltip>
      )}
    </CopyButton>
  );
}
