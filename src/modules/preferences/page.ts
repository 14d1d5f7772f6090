import { escapeHtml } from '../../mail/locales.ts';

/** A small self-contained HTML page: no script, no external resources, works without JavaScript. */
export function page(opts: { title: string; message: string; form?: { action: string; button: string; field?: [string, string] } }): string {
  const form = opts.form
    ? `<form method="post" action="${escapeHtml(opts.form.action)}">${
        opts.form.field ? `<input type="hidden" name="${escapeHtml(opts.form.field[0])}" value="${escapeHtml(opts.form.field[1])}">` : ''
      }<button type="submit">${escapeHtml(opts.form.button)}</button></form>`
    : '';
  return `<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${escapeHtml(opts.title)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem;color:#111827}
button{font:inherit;padding:.5rem 1rem;border-radius:.375rem;border:1px solid #111827;background:#111827;color:#fff;cursor:pointer}</style>
</head><body><h1>${escapeHtml(opts.title)}</h1><p>${escapeHtml(opts.message)}</p>${form}</body></html>`;
}

export const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};
