/** The image formats we host, recognised by their magic bytes only (never by file name or declared type). */
export type ImageType = { contentType: 'image/jpeg' | 'image/png' | 'image/gif' | 'image/webp'; ext: ImageExt };
export type ImageExt = 'jpg' | 'png' | 'gif' | 'webp';

export const CONTENT_TYPE_BY_EXT: Record<ImageExt, ImageType['contentType']> = {
  jpg: 'image/jpeg',
  png: 'image/png',
  gif: 'image/gif',
  webp: 'image/webp',
};

const startsWith = (buf: Buffer, bytes: number[], offset = 0) => buf.length >= offset + bytes.length && bytes.every((b, i) => buf[offset + i] === b);

const ascii = (s: string) => [...s].map((c) => c.charCodeAt(0));

export function detectImageType(buf: Buffer): ImageType | null {
  if (startsWith(buf, [0xff, 0xd8, 0xff])) return { contentType: 'image/jpeg', ext: 'jpg' };
  if (startsWith(buf, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return { contentType: 'image/png', ext: 'png' };
  if (startsWith(buf, ascii('GIF87a')) || startsWith(buf, ascii('GIF89a'))) return { contentType: 'image/gif', ext: 'gif' };
  if (startsWith(buf, ascii('RIFF')) && startsWith(buf, ascii('WEBP'), 8)) return { contentType: 'image/webp', ext: 'webp' };
  return null;
}

/** SVG is refused (it can carry scripts); recognising it lets the error say why. */
export function looksLikeSvg(buf: Buffer): boolean {
  const head = buf
    .subarray(0, 1024)
    .toString('utf8')
    .replace(/^\uFEFF/, '')
    .trimStart()
    .toLowerCase();
  return head.startsWith('<svg') || (head.startsWith('<?xml') && head.includes('<svg')) || /^<!doctype svg/.test(head);
}
