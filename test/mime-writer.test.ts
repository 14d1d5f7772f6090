import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { simpleParser } from 'mailparser';
import MailComposer from 'nodemailer/lib/mail-composer';
import { buildMessage } from '../src/mail/build-message.ts';
import { type AlternativeMessage, writeAlternativeMessage, writeMimeTree } from '../src/mail/mime-writer.ts';

type Case = ConstructorParameters<typeof MailComposer>[0];

const base = { messageId: '<fixed@mail.example.test>', date: new Date('2026-11-26T10:00:00Z'), from: 'sender@mail.example.test', to: 'ada@example.com' };

/** The lean writer's source and nodemailer's own build of the same compiled tree. */
async function both(c: Case): Promise<{ lean: Buffer | null; reference: Buffer }> {
  const tree = new MailComposer({ ...base, ...c, disableFileAccess: true, disableUrlAccess: true }).compile();
  const lean = writeMimeTree(tree);
  return { lean, reference: await tree.build() };
}

const shapes: Record<string, Case> = {
  'HTML and text, ASCII': { subject: 'Order 42', html: '<p>Hello Ada</p>', text: 'Hello Ada' },
  'non-ASCII subject, names and bodies (quoted-printable and base64)': {
    subject: 'Grüße aus Köln — 🎉',
    from: { name: 'Zoë Ünicode', address: 'z@mail.example.test' },
    to: { name: '山田 太郎', address: 'taro@example.com' },
    html: `<p>Grüße ${'x'.repeat(200)}</p>  `,
    text: '日本語のテキスト'.repeat(40),
  },
  'long lines, trailing whitespace, lone CR and LF': {
    subject: 's'.repeat(300),
    html: `a\r\nb\nc\rd ${' '.repeat(80)}\t`,
    text: `line  \n${'word '.repeat(40)}\t `,
  },
  'custom headers and reply-to': {
    subject: 'Headers',
    html: '<p>x</p>',
    text: 'x',
    replyTo: 'replies@example.com',
    headers: {
      'X-Custom': 'v é',
      'List-Unsubscribe': `<https://herald.example/u?t=${'a'.repeat(120)}>`,
      'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
    },
  },
  'inline and regular attachments': {
    subject: 'Attachments',
    html: '<img src="cid:logo@x">',
    text: 'see attached',
    attachments: [
      {
        filename: 'logo.png',
        content: Buffer.alloc(5000, 7).toString('base64'),
        encoding: 'base64',
        contentType: 'image/png',
        cid: 'logo@x',
        contentDisposition: 'inline',
      },
      {
        filename: 'résumé.pdf',
        content: Buffer.alloc(301, 1).toString('base64'),
        encoding: 'base64',
        contentType: 'application/pdf',
        contentDisposition: 'attachment',
      },
    ],
  },
};

describe('the lean MIME writer', () => {
  for (const [name, c] of Object.entries(shapes)) {
    test(`writes exactly what nodemailer builds: ${name}`, async () => {
      const { lean, reference } = await both(c);
      assert.ok(lean, 'the writer handles this shape');
      assert.equal(lean.toString('latin1'), reference.toString('latin1'));
    });
  }

  test('matches nodemailer on 500 random messages mixing line breaks, whitespace, non-ASCII and long lines', async () => {
    const pieces = ['a', 'b', ' ', '\t', '\r\n', '\n', '\r', 'é', '日', '🎉', '=', '.', '<p>', 'x'.repeat(70), ' '.repeat(75)];
    let seed = 42;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const text = (max: number) => Array.from({ length: Math.floor(random() * max) }, () => pieces[Math.floor(random() * pieces.length)]).join('');
    for (let i = 0; i < 500; i++) {
      const c: Case = {
        subject: text(20),
        html: text(200),
        text: random() < 0.3 ? undefined : text(100),
        from: { name: text(5), address: 'a@mail.example.test' },
      };
      const { lean, reference } = await both(c);
      assert.ok(lean, `case ${i} is handled`);
      assert.ok(lean.equals(reference), `case ${i} differs: ${JSON.stringify(c)}`);
    }
  });

  test('leaves to nodemailer what it does not write the same way: a raw source, a stream, a part over 64 KB of quoted-printable', async () => {
    const raw = new MailComposer({ raw: 'Subject: raw\r\n\r\nbody\r\n' }).compile();
    assert.equal(writeMimeTree(raw), null);
    const { Readable } = await import('node:stream');
    const streamed = new MailComposer({ ...base, subject: 's', html: Readable.from(['<p>streamed</p>']) }).compile();
    assert.equal(writeMimeTree(streamed), null);
    const big = await both({ subject: 'big', html: `<p>Grüße</p>${'a'.repeat(70_000)}` });
    assert.equal(big.lean, null);
    // buildMessage falls back to nodemailer's build for these: still a whole message.
    const built = await buildMessage({
      ...base,
      from: { email: base.from },
      to: { email: base.to },
      subject: 'big',
      html: `<p>Grüße</p>${'a'.repeat(70_000)}`,
      headers: {},
    });
    const parsed = await simpleParser(built);
    assert.equal(parsed.subject, 'big');
    assert.equal(parsed.html, `<p>Grüße</p>${'a'.repeat(70_000)}`);
  });

  test('what buildMessage returns parses back to the same message', async () => {
    const raw = await buildMessage({
      messageId: '<parsed@mail.example.test>',
      date: new Date('2026-11-26T10:00:00Z'),
      from: { email: 'sender@mail.example.test', name: 'Zoë' },
      to: { email: 'ada@example.com' },
      subject: 'Grüße 🎉',
      html: '<p>Hello Ada, <a href="https://example.com/x">track</a></p>',
      text: 'Hello Ada',
      headers: { 'X-Campaign': 'spring' },
    });
    const parsed = await simpleParser(raw);
    assert.equal(parsed.subject, 'Grüße 🎉');
    assert.equal(parsed.from?.value[0].name, 'Zoë');
    assert.equal(parsed.messageId, '<parsed@mail.example.test>');
    assert.equal(parsed.text?.trim(), 'Hello Ada');
    assert.equal(parsed.html, '<p>Hello Ada, <a href="https://example.com/x">track</a></p>');
    assert.equal(parsed.headers.get('x-campaign'), 'spring');
  });
});

describe('the writer of HTML and text messages', () => {
  /** The writer's source and MailComposer's build of the same message, with the same boundary. */
  async function same(m: AlternativeMessage): Promise<{ lean: Buffer | null; reference: Buffer }> {
    const boundary = '0123456789abcdef';
    const reference = await new MailComposer({ ...m, baseBoundary: boundary, disableFileAccess: true, disableUrlAccess: true }).compile().build();
    return { lean: writeAlternativeMessage(m, boundary), reference };
  }
  const message = (m: Partial<AlternativeMessage>): AlternativeMessage => ({
    ...base,
    subject: 'Order 42',
    html: '<p>Hello</p>',
    text: 'Hello',
    headers: {},
    ...m,
  });

  for (const [name, c] of Object.entries(shapes)) {
    if (!c || c.attachments) continue;
    test(`writes exactly what MailComposer builds: ${name}`, async () => {
      const { lean, reference } = await same(message({ ...(c as Partial<AlternativeMessage>), text: (c.text as string | undefined) ?? 'text' }));
      assert.ok(lean, 'the writer handles this shape');
      assert.equal(lean.toString('latin1'), reference.toString('latin1'));
    });
  }

  test('matches MailComposer on 1,000 random messages: names, subjects, custom headers, bodies', async () => {
    const pieces = [
      'a',
      'Z',
      ' ',
      '  ',
      '\t',
      '\r\n',
      '\n',
      'é',
      '日',
      '🎉',
      '=',
      '.',
      '"',
      ',',
      '<',
      '@',
      ':',
      ';',
      '\\',
      '=?',
      'x'.repeat(70),
      ' '.repeat(75),
    ];
    const keys = ['x-custom', 'X-SMTPAPI', 'mime-thing', 'dkim-extra', 'x-fbl-id', 'List-Id', 'x-MD5', 'X-Campaign-Id', 'content-features', 'otp-token2'];
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const pick = <T>(list: T[]) => list[Math.floor(random() * list.length)];
    const text = (max: number) => Array.from({ length: Math.floor(random() * max) }, () => pick(pieces)).join('');
    const address = (email: string) => (random() < 0.5 ? email : { name: text(6), address: email });
    for (let i = 0; i < 1000; i++) {
      const m = message({
        subject: text(30),
        html: text(150) || '<p>x</p>',
        text: text(80) || 'x',
        from: address('news@mail.example.test'),
        to: address(pick(['ada@example.com', 'Ada.Lovelace+tag@Example.COM', "o'brien@example.org"])),
        replyTo: random() < 0.3 ? pick(['help@example.com', '"Help Desk" <help@example.com>', 'Zoë <z@example.com>']) : undefined,
        headers: Object.fromEntries(Array.from({ length: Math.floor(random() * 4) }, () => [pick(keys), text(40).replace(/[\r\n]/g, '')])),
      });
      const { lean, reference } = await same(m);
      assert.ok(lean, `case ${i} is handled`);
      assert.ok(lean.equals(reference), `case ${i} differs: ${JSON.stringify(m)}\n${lean.toString()}\n---\n${reference.toString()}`);
    }
  });

  test('gives every message its own random boundary of 16 hex digits', () => {
    const boundaries = Array.from({ length: 1500 }, () => {
      const source = writeAlternativeMessage(message({}))!.toString();
      return /boundary="--_NmP-([^"]*)-Part_1"/.exec(source)?.[1];
    });
    assert.ok(
      boundaries.every((b) => b !== undefined && /^[0-9a-f]{16}$/.test(b)),
      String(boundaries.find((b) => !/^[0-9a-f]{16}$/.test(b ?? ''))),
    );
    assert.equal(new Set(boundaries).size, boundaries.length);
  });

  test('leaves to MailComposer an empty part, a header it sets itself, and a part over 64 KB of quoted-printable', async () => {
    assert.equal(writeAlternativeMessage(message({ text: '' })), null);
    assert.equal(writeAlternativeMessage(message({ html: '' })), null);
    for (const name of ['content-type', 'CC', 'mime-version', 'Content-Transfer-Encoding', 'bcc', 'references', ' :']) {
      assert.equal(writeAlternativeMessage(message({ headers: { [name]: 'v' } })), null, name);
    }
    assert.equal(writeAlternativeMessage(message({ html: `<p>Grüße</p>${'a'.repeat(70_000)}` })), null);
  });
});
