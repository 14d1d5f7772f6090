import type { Node, Test } from './ir.ts';
import type { EmailActivity } from './types.ts';
import { dataAt, foldCase, storedDateInstant } from './values.ts';

/**
 * The in-memory back end: a plan node evaluated for one contact and its facts. Same nodes, same
 * meaning as compile.ts; the property test holds the two to the same answers.
 */

/** The contact fields a condition reads (a ContactRecord fits). */
export type EvalContact = {
  email: string;
  subscribed: boolean;
  data: Record<string, unknown>;
  createdAt: string | Date;
  updatedAt: string | Date;
};

/** What a condition can ask about a contact beyond its fields. Instants are epoch milliseconds. */
export type ContactFacts = {
  events: readonly { name: string; at: number }[];
  /** One entry per email to the contact: when each activity happened (absent or null: never). */
  emails: readonly Partial<Record<EmailActivity, number | null>>[];
  memberOf: (segmentId: string) => boolean;
};

export function evaluateNode(n: Node, contact: EvalContact, facts: ContactFacts): boolean {
  switch (n.node) {
    case 'const':
      return n.value;
    case 'and':
      return n.children.every((c) => evaluateNode(c, contact, facts));
    case 'or':
      return n.children.some((c) => evaluateNode(c, contact, facts));
    case 'not':
      return !evaluateNode(n.child, contact, facts);
    case 'member':
      return facts.memberOf(n.segmentId);
    case 'activity': {
      const inRange = (at: number | null | undefined) => typeof at === 'number' && (n.from === null || at >= n.from) && (n.to === null || at < n.to);
      const times =
        n.source.kind === 'event'
          ? facts.events.filter((e) => e.name === (n.source as { name: string }).name).map((e) => e.at)
          : facts.emails.map((m) => m[(n.source as { activity: EmailActivity }).activity]);
      return times.filter(inRange).length >= n.atLeast;
    }
    case 'value': {
      if (n.access.from === 'data') return dataTest(dataAt(contact.data, n.access.path), n.test);
      const name = n.access.name;
      const raw = contact[name];
      if (name === 'createdAt' || name === 'updatedAt') return columnTest(new Date(raw as string | Date).getTime(), n.test);
      return columnTest(raw as string | boolean, n.test);
    }
  }
}

const inRange = (t: number, from: number | null, to: number | null) => (from === null || t >= from) && (to === null || t < to);

function textTest(s: string, mode: 'contains' | 'startsWith' | 'endsWith', needle: string): boolean {
  const folded = foldCase(s);
  return mode === 'contains' ? folded.includes(needle) : mode === 'startsWith' ? folded.startsWith(needle) : folded.endsWith(needle);
}

/** Standard fields: never missing. `email` compares case-insensitively; dates are epoch ms. */
function columnTest(v: string | boolean | number, t: Test): boolean {
  const cmp = typeof v === 'string' ? foldCase(v) : v;
  switch (t.test) {
    case 'present':
      return true;
    case 'equals':
      return cmp === t.value;
    case 'oneOf':
      return t.values.includes(cmp as string);
    case 'text':
      return typeof v === 'string' && textTest(v, t.mode, t.value);
    case 'range':
      return typeof v === 'number' && inRange(v, t.from, t.to);
    case 'compare':
      return false;
  }
}

/** A `data` value: only a value of the field's JSON type passes a test other than `present`. */
function dataTest(v: unknown, t: Test): boolean {
  switch (t.test) {
    case 'present':
      return v !== undefined && v !== null;
    case 'equals':
      return typeof v === typeof t.value && v === t.value;
    case 'oneOf':
      return t.values.some((x) => typeof x === typeof v && x === v);
    case 'compare':
      if (typeof v !== 'number') return false;
      return t.op === '<' ? v < t.value : t.op === '<=' ? v <= t.value : t.op === '>' ? v > t.value : v >= t.value;
    case 'text':
      return typeof v === 'string' && textTest(v, t.mode, t.value);
    case 'range': {
      const at = storedDateInstant(v, t.fullOnly);
      return at !== null && inRange(at, t.from, t.to);
    }
  }
}
