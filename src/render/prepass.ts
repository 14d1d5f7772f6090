/**
 * Rewrites the spec's two non-Liquid shorthands into valid Liquid before parsing:
 *
 * - `{{ a ?? "b" }}`   → `{{ a | fallback: "b" }}` (fallback only for missing, null or empty, not false/0)
 * - `{{ first name }}` → `{{ ["first name"] }}` (a key containing spaces, as a bracket lookup)
 *
 * Only `{{ … }}` outputs are rewritten. `{% … %}` tags, `{% raw %}` blocks, string literals and
 * plain HTML are copied unchanged. The scan follows liquidjs's tokenizer: outputs end at the first
 * `}}` outside a quoted string, tags at the first `%}`.
 */
export function rewriteShorthands(source: string): string {
  if (!source.includes('{{')) return source;
  let out = '';
  let i = 0;
  // The next tag and output are looked for again only once the scan has passed them: searching
  // for both at every step made many outputs and no tag (or the reverse) quadratic: 100 KB of
  // `{{a}}` took 2.3 s.
  let tag = source.indexOf('{%');
  let output = source.indexOf('{{');
  while (i < source.length) {
    if (tag !== -1 && tag < i) tag = source.indexOf('{%', i);
    if (output !== -1 && output < i) output = source.indexOf('{{', i);
    if (output === -1) break;
    if (tag !== -1 && tag < output) {
      const end = skipTag(source, tag);
      out += source.slice(i, end);
      i = end;
      continue;
    }
    const end = outputEnd(source, output + 2);
    if (end === -1) break; // unclosed: leave it for the Liquid parser to report
    out += source.slice(i, output) + '{{' + rewriteOutput(source.slice(output + 2, end)) + '}}';
    i = end + 2;
  }
  return out + source.slice(i);
}

/** End (exclusive) of the tag starting at `start`, past a whole `{% raw %}…{% endraw %}` block. */
function skipTag(source: string, start: number): number {
  const close = source.indexOf('%}', start + 2);
  if (close === -1) return source.length;
  const end = close + 2;
  if (!/^\{%-?\s*raw\s*-?%\}$/.test(source.slice(start, end))) return end;
  const endraw = /\{%-?\s*endraw\s*-?%\}/g;
  endraw.lastIndex = end;
  const m = endraw.exec(source);
  return m ? m.index + m[0].length : source.length;
}

/** Index of the `}}` closing an output whose content starts at `from`, skipping quoted strings (-1: none). */
export function outputEnd(source: string, from: number): number {
  let i = from;
  while (i < source.length) {
    const c = source[i];
    if (c === '"' || c === "'") {
      i = quotedEnd(source, i);
      continue;
    }
    if (c === '}' && source[i + 1] === '}') return i;
    i++;
  }
  return -1;
}

/** Index just past the string literal opening at `start` (backslash escapes as liquidjs reads them). */
function quotedEnd(s: string, start: number): number {
  let escaped = false;
  for (let i = start + 1; i < s.length; i++) {
    if (escaped) escaped = false;
    else if (s[i] === '\\') escaped = true;
    else if (s[i] === s[start]) return i + 1;
  }
  return s.length;
}

/** Splits on a separator found outside string literals. */
function splitTopLevel(s: string, sep: string): string[] {
  const parts: string[] = [];
  let last = 0;
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    if (c === '"' || c === "'") {
      i = quotedEnd(s, i);
      continue;
    }
    if (s.startsWith(sep, i)) {
      parts.push(s.slice(last, i));
      i += sep.length;
      last = i;
      continue;
    }
    i++;
  }
  parts.push(s.slice(last));
  return parts;
}

// Two or more bare words separated by spaces: a key with spaces, not a Liquid expression.
const SPACED_KEY = /^\s*([\p{L}_][\p{L}\p{N}_-]*(?:[ \t]+[\p{L}\p{N}_-]+)+)\s*$/u;

function operand(expr: string): string {
  const m = SPACED_KEY.exec(expr);
  return m ? ` ["${m[1]}"] ` : expr;
}

function rewriteOutput(content: string): string {
  if (!content.includes('??') && !/\S[ \t]+\S/.test(content)) return content;
  // Keep whitespace-control dashes (`{{-` / `-}}`) where Liquid expects them.
  const lead = content.startsWith('-') ? '-' : '';
  const trail = content.length > lead.length && content.endsWith('-') ? '-' : '';
  const inner = content.slice(lead.length, content.length - trail.length);
  const segments = splitTopLevel(inner, '|').map((segment, index) => {
    const [head, ...fallbacks] = splitTopLevel(segment, '??');
    const first = index === 0 ? operand(head) : head;
    return [first, ...fallbacks.map((f) => ` fallback: ${operand(f).trim()} `)].join('|');
  });
  return lead + segments.join('|') + trail;
}
