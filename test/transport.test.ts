import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import nodemailer from 'nodemailer';
import { createTransport } from '../src/mail/transport.ts';
import { type SmtpSink, startSmtpSink } from './helpers/smtp-sink.ts';

/**
 * The SMTP transport hands sources to nodemailer's pool itself rather than through sendMail
 * (src/mail/transport.ts): the relay must get what sendMail would have sent, byte for byte.
 */
describe('SMTP transport', () => {
  let sink: SmtpSink;
  let herald: ReturnType<typeof createTransport>;
  let reference: ReturnType<typeof nodemailer.createTransport>;
  before(async () => {
    sink = await startSmtpSink();
    herald = createTransport({ smtpUrl: sink.url, smtpPoolSize: 2 });
    reference = nodemailer.createTransport({ url: sink.url, pool: true, maxConnections: 1 });
  });
  after(async () => {
    await herald.close();
    reference.close();
    await sink.stop();
  });

  const header = 'From: a@mail.example.test\r\nTo: b@example.org\r\nSubject: hi\r\n\r\n';
  const sources: [string, string][] = [
    ['a final CRLF', `${header}hello\r\n`],
    ['no final line break', `${header}hello`],
    ['a final bare CR', `${header}hello\r`],
    ['a final bare LF', `${header}hello\n`],
    ['lines that start with a dot, and a lone dot', `${header}.hidden\r\n.\r\n..two\r\nend\r\n`],
    ['8-bit bytes', `${header}gr\u00fc\u00dfe \u2603\r\n`],
  ];

  for (const [name, source] of sources) {
    test(`a source with ${name} reaches the relay as sendMail would send it`, async () => {
      const raw = Buffer.from(source);
      const before = sink.messages.length;
      const outcome = await herald.send(raw, { from: 'a@mail.example.test', to: 'b@example.org' });
      assert.equal(outcome.kind, 'accepted');
      await reference.sendMail({ envelope: { from: 'a@mail.example.test', to: ['b@example.org'] }, raw });
      const [ours, theirs] = await sink.waitFor(before + 2).then((all) => all.slice(before));
      assert.deepEqual(ours.envelope, theirs.envelope);
      assert.equal(ours.raw.toString('latin1'), theirs.raw.toString('latin1'));
      assert.ok(ours.raw.toString('latin1').endsWith('\r\n'));
    });
  }

  test('envelope addresses are normalized as sendMail normalizes them (an internationalized domain)', async () => {
    const before = sink.messages.length;
    const raw = Buffer.from(`${header}hi\r\n`);
    const to = 'Kunde@B\u00fccher.example';
    assert.equal((await herald.send(raw, { from: 'a@mail.example.test', to })).kind, 'accepted');
    await reference.sendMail({ envelope: { from: 'a@mail.example.test', to: [to] }, raw });
    const [ours, theirs] = (await sink.waitFor(before + 2)).slice(before);
    assert.deepEqual(ours.envelope, theirs.envelope);
  });

  test('with a commit step, the relay is asked to accept only after it; a failed commit sends nothing and is transient', async () => {
    const raw = Buffer.from(`${header}gated\r\n`);
    const envelope = { from: 'a@mail.example.test', to: 'b@example.org' };
    const before = sink.messages.length;
    let committedWith = -1;
    const sent = await herald.send(raw, envelope, {
      commit: async () => {
        committedWith = sink.messages.length;
      },
    });
    assert.equal(sent.kind, 'accepted');
    assert.equal(committedWith, before, 'nothing had been accepted when the commit ran');
    const [ours] = (await sink.waitFor(before + 1)).slice(before);
    assert.equal(ours.raw.toString(), raw.toString());

    const refused = await herald.send(raw, envelope, {
      commit: async () => {
        throw new Error('claim lost');
      },
    });
    assert.equal(refused.kind, 'transient');
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(sink.messages.length, before + 1, 'the relay got no second message');
  });

  test("the relay's answers: 5xx to RCPT TO is a rejection, 5xx after DATA a failure, 4xx transient", async () => {
    const raw = Buffer.from(`${header}hi\r\n`);
    const envelope = { from: 'a@mail.example.test', to: 'b@example.org' };
    sink.failNext({ stage: 'rcpt', code: 550, message: 'no such user' });
    assert.deepEqual(await herald.send(raw, envelope), { kind: 'rejected', response: '550 no such user' });
    sink.failNext({ stage: 'data', code: 554, message: 'spam' });
    assert.deepEqual(await herald.send(raw, envelope), { kind: 'failed', response: '554 spam' });
    sink.failNext({ stage: 'data', code: 451, message: 'try later' });
    assert.deepEqual(await herald.send(raw, envelope), { kind: 'transient', response: '451 try later' });
    const after = await herald.send(raw, envelope);
    assert.equal(after.kind, 'accepted', 'the connection is still usable after refusals');
    assert.match(after.kind === 'accepted' ? after.response : '', /^250/);
  });
});
