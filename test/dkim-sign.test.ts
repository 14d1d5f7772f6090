import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { test } from 'node:test';
import { dkimVerify } from 'mailauth';
import { dkimSign } from 'mailauth/lib/dkim/sign.js';
import { buildMessage } from '../src/mail/build-message.ts';
import { dkimSignatureFor } from '../src/mail/dkim-sign.ts';
import { dkimRecordValue, generateDkimKey } from '../src/modules/domains/dkim-keys.ts';

test('a DKIM signature verifies even when the clock crosses a half-second while signing', async () => {
  const key = await generateDkimKey();
  const raw = Buffer.from('From: a@mail.example.test\r\nTo: b@example.org\r\nSubject: hi\r\nDate: Wed, 25 Nov 2026 13:00:00 +0000\r\n\r\nhello\r\n');
  const signedAt = new Date('2026-11-25T13:00:00.400Z');
  const realNow = Date.now;
  let reads = 0;
  // Every other read of the clock is 700 ms later: any second read rounds to another second.
  Date.now = () => realNow() + (reads++ % 2) * 700;
  let result;
  try {
    result = await dkimSignatureFor({ raw, domain: 'mail.example.test', selector: 'herald', privateKeyPem: key.privateKeyPem }, signedAt);
  } finally {
    Date.now = realNow;
  }
  assert.ok('signatures' in result, JSON.stringify(result));
  assert.match(result.signatures.replace(/\r\n\s+/g, ' '), / t=1795611600;/, 'the signature carries the time it was given');
  const verdict = await dkimVerify(Buffer.concat([Buffer.from(result.signatures), raw]), {
    resolver: async (name: string) => {
      assert.equal(name, 'herald._domainkey.mail.example.test');
      return [[dkimRecordValue(key.publicKey)]];
    },
  } as unknown as Parameters<typeof dkimVerify>[1]);
  const status = verdict.results[0].status as { result: string; comment?: string };
  assert.deepEqual({ result: status.result, comment: status.comment }, { result: 'pass', comment: undefined });
});

test("the signature is mailauth's own, byte for byte, for every shape of message", async () => {
  const key = await generateDkimKey();
  const signedAt = new Date('2026-11-27T10:00:00.000Z');
  const built = await buildMessage({
    messageId: '<m1@mail.example.test>',
    date: signedAt,
    from: { email: 'news@mail.example.test', name: 'Zoë — News' },
    to: { email: 'ada@example.org', name: 'Ada "Countess" Lovelace' },
    replyTo: 'help@mail.example.test',
    subject: `Ünïcode subject that is long enough to be folded over several lines ${'x'.repeat(80)}`,
    html: `<p>Hello Ada</p>\n<p>trailing spaces   \n\n\n</p>${'<b>long line</b>'.repeat(40)}`,
    headers: { 'List-Unsubscribe': '<https://mail.example.test/u/abc>', 'X-Dup': 'one' },
    attachments: [{ filename: 'a.txt', content: Buffer.from('attached\r\n').toString('base64'), contentType: 'text/plain' }],
  });
  const messages: Record<string, Buffer> = {
    'a built message with an attachment': built,
    'folded and repeated headers': Buffer.from(
      'From: a@mail.example.test\r\nSubject: one\r\n  two\r\n\tthree\r\nTo: b@example.org\r\nTo: c@example.org\r\nX-Other: skipped\r\n\r\nbody\r\n',
    ),
    'an empty body': Buffer.from('From: a@mail.example.test\r\nSubject: empty\r\n\r\n'),
    'trailing whitespace and empty lines at the end': Buffer.from('From: a@mail.example.test\r\n\r\n a \t b  \r\n\r\n\r\n  \r\n\r\n'),
    'a body without a final line break': Buffer.from('From: a@mail.example.test\r\n\r\nno break'),
    '8-bit bytes and a lone CR': Buffer.from([...Buffer.from('From: a@mail.example.test\r\nSubject: caf\xe9\r\n\r\n', 'latin1'), 0xff, 0x0d, 0x41, 0x0d, 0x0a]),
    'bare LF line breaks (a 7bit part of a built message has them)': Buffer.from('From: a@mail.example.test\nSubject: lf\n\nbody\n\n\nmore\n'),
    'CRLF and LF mixed': Buffer.from('From: a@mail.example.test\r\nSubject: mixed\n\r\nbody\r\nmore\nend\n'),
    // mailauth reads an LF right after a CRLF as bare, and ends the header there: dkimSign signs this one.
    'an LF after a CRLF': Buffer.from('From: a@mail.example.test\r\nSubject: x\r\n\nbody\r\n\nmore\r\n'),
  };
  for (const [what, raw] of Object.entries(messages)) {
    const options = {
      signingDomain: 'mail.example.test',
      selector: 'herald',
      privateKey: key.privateKeyPem,
      canonicalization: 'relaxed/relaxed',
      algorithm: 'rsa-sha256',
    };
    const expected = await dkimSign(raw, { ...options, signatureData: [options], signTime: signedAt });
    assert.deepEqual(expected.errors, [], what);
    const result = await dkimSignatureFor({ raw, domain: 'mail.example.test', selector: 'herald', privateKeyPem: key.privateKeyPem }, signedAt);
    assert.deepEqual(result, { signatures: expected.signatures }, what);
  }
  // mailauth makes no signature for a message without the empty line that ends its header.
  const headersOnly = Buffer.from('From: a@mail.example.test\r\nSubject: headers only\r\n');
  const result = await dkimSignatureFor({ raw: headersOnly, domain: 'mail.example.test', selector: 'herald', privateKeyPem: key.privateKeyPem }, signedAt);
  assert.deepEqual(result, { error: 'no signature produced' });
});

test('a key that is not RSA is refused with the reason', async () => {
  const { privateKey } = crypto.generateKeyPairSync('ed25519');
  const raw = Buffer.from('From: a@mail.example.test\r\n\r\nbody\r\n');
  const result = await dkimSignatureFor({
    raw,
    domain: 'mail.example.test',
    selector: 'herald',
    privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
  });
  assert.deepEqual(result, { error: 'Invalid key type: "ed25519" (expecting "rsa")' });
});
