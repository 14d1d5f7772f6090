import { type LinkAction, signLinkToken } from './link-tokens.ts';

export type VariableOptions = {
  publicUrl: string;
  secret: string;
  projectId: string;
  emailId?: string;
  contact: { id: string; email: string; data: Record<string, unknown> };
  /** Values for this send only: either bare or wrapped as `{ value, persistent: false }`. */
  oneOff?: Record<string, unknown>;
  /** `locale` when the contact has none (e.g. the project's language); default `en`. */
  defaultLocale?: string;
};

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `{ value, persistent: false }` → value; anything else as is. */
export function unwrapOneOff(v: unknown): unknown {
  return isPlainObject(v) && 'value' in v && v.persistent === false ? v.value : v;
}

/**
 * The variables a template is rendered with: every contact data key at top level, one-off values
 * unwrapped and overriding them, then the service's own variables, which win over data keys of the
 * same name: `id`, `email`, `data` (the merged object), `locale`, and the signed `unsubscribeUrl`,
 * `subscribeUrl` and `manageUrl` (`${publicUrl}/<action>/<token>`, never a bare contact id).
 */
export function buildVariables(opts: VariableOptions): Record<string, unknown> {
  // Object.fromEntries defines own properties, so a key such as "__proto__" stays plain data.
  const data = Object.fromEntries([
    ...Object.entries(opts.contact.data ?? {}),
    ...Object.entries(opts.oneOff ?? {}).map(([k, v]) => [k, unwrapOneOff(v)] as const),
  ]);
  const base = opts.publicUrl.replace(/\/+$/, '');
  const url = (action: LinkAction) => {
    const token = signLinkToken(opts.secret, {
      projectId: opts.projectId,
      contactId: opts.contact.id,
      action,
      ...(opts.emailId ? { emailId: opts.emailId } : {}),
    });
    return `${base}/${action}/${token}`;
  };
  const locale = typeof data.locale === 'string' && data.locale !== '' ? data.locale : (opts.defaultLocale ?? 'en');
  return Object.fromEntries([
    ...Object.entries(data),
    ['id', opts.contact.id],
    ['email', opts.contact.email],
    ['data', data],
    ['locale', locale],
    ['unsubscribeUrl', url('unsubscribe')],
    ['subscribeUrl', url('subscribe')],
    ['manageUrl', url('manage')],
  ]);
}
