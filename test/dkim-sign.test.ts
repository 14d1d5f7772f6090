import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dkimVerify } from 'mailauth';
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
