import { defaultKeymap, history, historyKeymap, indentWithTab } from '@codemirror/commands';
import { html } from '@codemirror/lang-html';
import { bracketMatching, defaultHighlightStyle, indentOnInput, syntaxHighlighting } from '@codemirror/language';
import { EditorView, drawSelection, highlightActiveLine, keymap, lineNumbers } from '@codemirror/view';
import { useEffect, useRef } from 'react';

/** `insertRef`: set to a function that puts text at the cursor (replacing the selection) while the editor is shown. */
type Props = { value: string; onChange: (value: string) => void; label: string; invalid?: boolean; insertRef?: { current: ((text: string) => void) | null } };

/** CodeMirror 6 for HTML with Liquid (loaded on demand: it is not part of the initial bundle). */
export default function CodeEditor({ value, onChange, label, invalid, insertRef }: Props) {
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | null>(null);
  const latest = useRef(onChange);
  latest.current = onChange;

  useEffect(() => {
    if (!host.current) return;
    const editor = new EditorView({
      doc: value,
      parent: host.current,
      extensions: [
        lineNumbers(),
        history(),
        drawSelection(),
        indentOnInput(),
        bracketMatching(),
        highlightActiveLine(),
        syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
        // Tab indents; Escape then Tab leaves the editor (CodeMirror's keyboard-trap escape).
        keymap.of([...defaultKeymap, ...historyKeymap, indentWithTab]),
        html(),
        EditorView.lineWrapping,
        EditorView.contentAttributes.of({ 'aria-label': label }),
        EditorView.updateListener.of((u) => {
          if (u.docChanged) latest.current(u.state.doc.toString());
        }),
        EditorView.theme({ '&': { fontSize: '13px', minHeight: '280px' }, '.cm-scroller': { minHeight: '280px', maxHeight: '560px' } }),
      ],
    });
    view.current = editor;
    if (insertRef) insertRef.current = (text) => editor.dispatch(editor.state.replaceSelection(text), { scrollIntoView: true });
    return () => {
      if (insertRef) insertRef.current = null;
      editor.destroy();
    };
    // The editor owns its document; outside changes are applied below.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);

  useEffect(() => {
    const editor = view.current;
    if (editor && editor.state.doc.toString() !== value) {
      editor.dispatch({ changes: { from: 0, to: editor.state.doc.length, insert: value } });
    }
  }, [value]);

  return (
    <div
      ref={host}
      style={{
        border: `1px solid ${invalid ? 'var(--mantine-color-error)' : 'var(--mantine-color-gray-4)'}`,
        borderRadius: 'var(--mantine-radius-md)',
        overflow: 'hidden',
      }}
    />
  );
}
