import { Anchor } from '@mantine/core';
import { useState } from 'react';

export const MAIN_ID = 'main-content';

/**
 * "Skip to content": the first Tab stop of a project page, hidden until focused, which moves focus
 * to the page's main region past the header and the navigation (WCAG 2.4.1). Focus is moved by
 * hand rather than by the #fragment, which would become a navigation of the router.
 */
export function SkipLink() {
  const [focused, setFocused] = useState(false);
  return (
    <Anchor
      href={`#${MAIN_ID}`}
      onFocus={() => setFocused(true)}
      onBlur={() => setFocused(false)}
      onClick={(event) => {
        event.preventDefault();
        document.getElementById(MAIN_ID)?.focus();
      }}
      style={{
        position: 'fixed',
        zIndex: 1000,
        top: 8,
        left: 8,
        padding: '8px 12px',
        background: 'var(--mantine-color-body)',
        border: '2px solid var(--mantine-primary-color-filled)',
        borderRadius: 'var(--mantine-radius-md)',
        // Off screen (not display: none, which would take it out of the Tab order) until focused.
        transform: focused ? 'none' : 'translateY(-200%)',
      }}
    >
      Skip to content
    </Anchor>
  );
}
