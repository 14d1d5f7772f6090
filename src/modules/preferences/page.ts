import { escapeHtml, stringsFor } from '../../mail/locales.ts';

/** A small self-contained HTML page: no script, no external resources, works without JavaScript. */
export function page(opts: {
  title: string;
  message: string;
  form?: {
    action: string;
    button: string;
    /** One hidden field (name, value). */
    field?: [string, string];
    /** A required email input, labelled. */
    email?: { name: string; label: string };
  };
  /** Who sends the emails: the project's name, shown above the title. */
  sender?: string | null;
  /** Links shown below the message (same-site paths). */
  links?: { text: string; href: string }[];
}): string {
  const f = opts.form;
  const form = f
    ? `<form method="post" action="${escapeHtml(f.action)}">${
        f.field ? `<input type="hidden" name="${escapeHtml(f.field[0])}" value="${escapeHtml(f.field[1])}">` : ''
      }${
        f.email
          ? `<label for="email">${escapeHtml(f.email.label)}</label><input id="email" type="email" name="${escapeHtml(f.email.name)}" required maxlength="254" autocomplete="email">`
          : ''
      }<button type="submit">${escapeHtml(f.button)}</button></form>`
    : '';
  return `<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${escapeHtml(opts.title)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem;color:#111827;line-height:1.5}
p.sender{color:#6b7280;font-size:.875rem;margin:0 0 -.5rem}
label{display:block;font-size:.875rem;margin:0 0 .25rem}
input[type=email]{display:block;box-sizing:border-box;width:100%;font:inherit;padding:.5rem;border:1px solid #9ca3af;border-radius:.375rem;margin:0 0 .75rem}
button{font:inherit;padding:.5rem 1rem;border-radius:.375rem;border:1px solid #111827;background:#111827;color:#fff;cursor:pointer}</style>
</head><body>${opts.sender ? `<p class="sender">${escapeHtml(opts.sender)}</p>` : ''}<h1>${escapeHtml(opts.title)}</h1><p>${escapeHtml(opts.message)}</p>${form}${
    opts.links?.length ? `<p>${opts.links.map((l) => `<a href="${escapeHtml(l.href)}">${escapeHtml(l.text)}</a>`).join(' · ')}</p>` : ''
  }</body></html>`;
}

export const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/** A link that does not work and tells nothing about whose it is (forged, cut off, mangled): in English, no project named. */
export function brokenLinkPage(): string {
  const s = stringsFor('en');
  return page({ title: s.expiredTitle, message: s.brokenLink });
}

/** The recipient pages' paths (unsubscribe, subscribe, manage): a request to one is a person following a link. */
export const RECIPIENT_PAGE_PATH = /^\/(unsubscribe|subscribe|manage)\//;
