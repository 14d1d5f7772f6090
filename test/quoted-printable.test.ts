import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import * as mimeFuncs from 'nodemailer/lib/mime-funcs';
import MimeNode from 'nodemailer/lib/mime-node';
import * as qp from 'nodemailer/lib/qp';
import { quotedPrintable, textTransferEncoding } from '../src/mail/quoted-printable.ts';

/** What MimeNode writes for a text/* part: its quoted-printable stream encoder, given the whole body. */
async function nodemailerQuotedPrintable(bytes: Buffer): Promise<Buffer> {
  const encoder = new qp.Encoder({ lineLength: 76, binary: false });
  const chunks: Buffer[] = [];
  encoder.on('data', (chunk: Buffer) => chunks.push(chunk));
  const ended = new Promise((resolve) => encoder.on('end', resolve));
  encoder.end(bytes);
  await ended;
  return Buffer.concat(chunks);
}

const node = new MimeNode() as MimeNode & { _getTextEncoding(value: string): 'Q' | 'B' };
/** MimeNode.getTransferEncoding for a text part given as a string. */
const nodemailerEncoding = (content: string) =>
  mimeFuncs.isPlainText(content) && !mimeFuncs.hasLongerLines(content, 76) ? '7bit' : node._getTextEncoding(content) === 'Q' ? 'quoted-printable' : 'base64';

/**
 * Bodies built from the pieces that steer the encoder: whitespace before line breaks, every kind
 * of line break, `=`, the characters a line may break after, UTF-8 sequences of each length (and
 * broken ones), and runs long enough to need soft breaks at every offset.
 */
const piece = fc.oneof(
  fc.constantFrom(' ', '\t', '\r\n', '\n', '\r', '=', '.', ',', '!', '?', 'a', 'Z', '0', 'F', '=3D', '\u0000', '\u007f', 'é', '日', '🎉', '\u2028'),
  fc.string({ maxLength: 90 }),
  fc.integer({ min: 1, max: 160 }).map((n) => 'x'.repeat(n)),
  fc.integer({ min: 1, max: 100 }).map((n) => ' '.repeat(n)),
  fc.integer({ min: 1, max: 40 }).map((n) => 'ü'.repeat(n)),
);
const body = fc.array(piece, { maxLength: 60 }).map((pieces) => pieces.join(''));
const bytes = fc.oneof(
  body.map((s) => Buffer.from(s, 'utf8')),
  // Not UTF-8: a text attachment's bytes can be anything.
  fc.uint8Array({ maxLength: 600 }).map((a) => Buffer.from(a)),
  fc.array(fc.constantFrom(0x20, 0x09, 0x0d, 0x0a, 0x3d, 0x2e, 0x41, 0x80, 0xbf, 0xc3, 0xe2, 0xf0, 0xff), { maxLength: 400 }).map((a) => Buffer.from(a)),
  // Long runs of UTF-8 continuation bytes: the wrapper moves them to the next line three at a time.
  fc
    .tuple(fc.string({ maxLength: 80 }), fc.integer({ min: 1, max: 60 }), fc.integer({ min: 0x80, max: 0xbf }), fc.string({ maxLength: 20 }))
    .map(([before, n, byte, after]) => Buffer.concat([Buffer.from(before), Buffer.alloc(n, byte), Buffer.from(after)])),
);

describe('quoted-printable text parts', () => {
  test('are written byte for byte as nodemailer’s stream encoder writes them', async () => {
    await fc.assert(
      fc.asyncProperty(bytes, async (input) => {
        const ours = quotedPrintable(input);
        assert.ok(ours);
        assert.equal(ours.toString('latin1'), (await nodemailerQuotedPrintable(input)).toString('latin1'));
      }),
      { numRuns: 3000 },
    );
  });

  test('a real newsletter and bodies at the 64 KB bound match too; larger ones are left to nodemailer', async () => {
    const story = (i: number) =>
      `<tr><td style="padding:24px 32px;font-family:Helvetica,Arial,sans-serif">\n<h2>Story ${i}: Grüße — what changed</h2>\n<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. 🎉</p>\n<p><a href="https://example.com/blog/story-${i}?utm_source=newsletter&amp;utm_medium=email">Read story ${i} &rarr;</a></p></td></tr>`;
    const newsletter = Buffer.from(`<html><body><table>${Array.from({ length: 40 }, (_, i) => story(i)).join('\n')}</table></body></html>  \t`);
    for (const input of [newsletter, Buffer.alloc(64 * 1024, 'é=  \r\n'), Buffer.alloc(64 * 1024, 'a')]) {
      assert.equal(quotedPrintable(input)?.toString('latin1'), (await nodemailerQuotedPrintable(input)).toString('latin1'));
    }
    assert.equal(quotedPrintable(Buffer.alloc(64 * 1024 + 1, 'a')), null);
  });

  test('take the transfer encoding nodemailer would take', () => {
    fc.assert(
      fc.property(body, (content) => assert.equal(textTransferEncoding(Buffer.from(content)), nodemailerEncoding(content))),
      { numRuns: 3000 },
    );
    const fixed: [string, string][] = [
      ['plain ASCII', '7bit'],
      [`${'x'.repeat(76)}\r\n${'y'.repeat(76)}`, '7bit'],
      ['x'.repeat(77), 'quoted-printable'],
      ['Grüße aus Köln', 'quoted-printable'],
      ['日本語のテキスト', 'base64'],
      ['a\u0000b', 'quoted-printable'],
      ['é', 'base64'],
      ['x'.repeat(128 * 1024 + 1), 'quoted-printable'],
    ];
    for (const [content, expected] of fixed) {
      assert.equal(textTransferEncoding(Buffer.from(content)), expected, `${content.slice(0, 20)} (${content.length})`);
      assert.equal(nodemailerEncoding(content), expected, `${content.slice(0, 20)} (${content.length})`);
    }
    // Over 2^24 code units of other characters (each 4-byte lead counts a surrogate pair), then as many letters, or one more.
    const leads = Buffer.alloc(9 * 2 ** 20, 0xf0);
    const other = 2 * leads.length;
    assert.equal(textTransferEncoding(Buffer.concat([leads, Buffer.alloc(other, 'a')])), 'base64');
    assert.equal(textTransferEncoding(Buffer.concat([leads, Buffer.alloc(other + 1, 'a')])), 'quoted-printable');
  });
});
