import { type Emitter, toValue } from 'liquidjs';

/** A rendering budget exceeded: output too large, too many steps (loop iterations), too long, or too much memory. */
export class RenderLimitError extends Error {
  /** The field whose render passed the limit, when one did (not a whole message's compose time). */
  field?: 'subject' | 'body';
  constructor(message: string, field?: 'subject' | 'body') {
    super(message);
    this.name = 'RenderLimitError';
    this.field = field;
  }
}

export const RENDER_LIMITS = {
  /** Characters of a rendered subject (a header line's limit, as the subject's source: RFC 5322). */
  maxSubject: 998,
  /** Characters of output per rendered field (subject or body). */
  maxOutput: 2 * 1024 * 1024,
  /** Template and loop-body renders per field: bounds loop iterations even when a loop outputs nothing. */
  maxSteps: 200_000,
  /** Wall-clock milliseconds per field. */
  maxMillis: 1_000,
  /** liquidjs allocation units (range sizes, string lengths built by filters). */
  maxMemory: 20_000_000,
  /** Hard wall-clock limit of composing one message (both fields, footer, tracking) in its thread. */
  maxComposeMillis: 3_000,
  /** Characters of Liquid source per template. */
  maxSource: 2 * 1024 * 1024,
  /**
   * `{{ }}` outputs plus `{% %}` tags per template (each statement of a `{% liquid %}` tag counts).
   * Parsing takes about 4 µs a tag and a parsed tag holds about 1.5 KB of heap: 10,000 bound both
   * to about 40 ms and 15 MB (checks that long run on a compose thread). Repetition belongs in a loop.
   */
  maxTags: 10_000,
  /**
   * Characters between the delimiters of a template's tags and outputs, all together. Markup parses
   * at up to 0.5 µs and 150 bytes of heap a character (a chain of 300,000 fallbacks: 680 ms and
   * 200 MB): 64 KB bound that to about 50 ms and 10 MB. Real templates hold a few KB.
   */
  maxMarkup: 64 * 1024,
} as const;

/**
 * The budget of one render. It stands in for liquidjs's own limiters (same `use`/`check` shape), so
 * every limit trips here and the first one tripped is remembered: liquidjs wraps thrown errors in
 * its own RenderError, and the caller rethrows `tripped` instead.
 */
export class RenderBudget {
  tripped: RenderLimitError | null = null;
  private steps = 0;
  private memory = 0;
  private output = 0;
  private readonly deadline: number;

  constructor(now = performance.now()) {
    this.deadline = now + RENDER_LIMITS.maxMillis;
  }

  private trip(message: string): never {
    this.tripped ??= new RenderLimitError(message);
    throw this.tripped;
  }

  /** Called by liquidjs (as `renderLimit.check`) before every template render, with the current time. */
  readonly renderLimit = {
    check: (now: number) => {
      if (++this.steps > RENDER_LIMITS.maxSteps) this.trip('Template is too complex: too many loop iterations');
      if (now > this.deadline) this.trip(`Template took longer than ${RENDER_LIMITS.maxMillis} ms to render`);
    },
    use: () => {},
  };

  /** Called by liquidjs (as `memoryLimit.use`) for ranges and filter-built strings. */
  readonly memoryLimit = {
    use: (count: number) => {
      if (+count > 0 && (this.memory += +count) > RENDER_LIMITS.maxMemory) {
        this.trip('Template uses too much memory (ranges or strings too large)');
      }
    },
    check: () => {},
  };

  /** Counts output written anywhere in the render (top level and captures). */
  charge(chars: number): void {
    this.output += chars;
    if (this.output > RENDER_LIMITS.maxOutput) {
      this.trip(`Rendered output exceeds ${RENDER_LIMITS.maxOutput / 1024 / 1024} MB`);
    }
  }
}

/** An output buffer that charges every write to the budget before growing. */
export class BoundedEmitter implements Emitter {
  buffer = '';
  private readonly budget: RenderBudget;

  constructor(budget: RenderBudget) {
    this.budget = budget;
  }

  write(html: unknown): void {
    const s = stringify(html);
    this.budget.charge(s.length);
    this.buffer += s;
  }
}

/** As liquidjs writes values: Drops by value, nil as '', arrays concatenated. */
function stringify(input: unknown): string {
  const value: unknown = toValue(input);
  if (typeof value === 'string') return value;
  if (value === null || value === undefined) return '';
  if (Array.isArray(value)) return value.map(stringify).join('');
  return String(value);
}
