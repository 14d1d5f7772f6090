// mailauth ships no types for the modules its DkimSigner is built from; dkim-sign.ts calls them
// directly. Only what dkim-sign.ts uses is declared.

declare module 'mailauth/lib/tools.js' {
  export type ParsedHeader = { key: string | null; casedKey: string | undefined; line: Buffer };
  export function parseHeaders(buf: Buffer): { parsed: ParsedHeader[]; original: Buffer };
  export function getSigningHeaderLines(parsed: ParsedHeader[], fieldNames?: string): { keys: string; headers: ParsedHeader[] };
  export function formatSignatureHeaderLine(type: 'DKIM', values: Record<string, unknown>, folded: boolean): string;
  export function getPrivateKey(key: string | Buffer): import('node:crypto').KeyObject;
}

declare module 'mailauth/lib/dkim/body/index.js' {
  export function dkimBody(
    canonicalization: 'relaxed' | 'simple',
    algorithm: string,
    maxBodyLength: number | false,
  ): { update(chunk: Buffer): void; digest(encoding: 'base64'): string };
}

declare module 'mailauth/lib/dkim/header/index.js' {
  export function generateCanonicalizedHeader(
    type: 'DKIM',
    signingHeaderLines: { keys: string; headers: import('mailauth/lib/tools.js').ParsedHeader[] },
    options: Record<string, unknown>,
  ): { canonicalizedHeader: Buffer; dkimHeaderOpts: Record<string, unknown> };
}
