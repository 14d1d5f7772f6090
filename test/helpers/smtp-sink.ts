import { Resolver } from 'node:dns/promises';
import { dkimVerify } from 'mailauth';
import { type ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';

export type SinkMessage = { raw: Buffer; parsed: ParsedMail; envelope: { from: string; to: string[] } };

type Failure = { stage: 'rcpt' | 'data'; code: number; message: string; times: number };

export type SmtpSink = {
  /** For SMTP_URL. */
  url: string;
  messages: SinkMessage[];
  /** Resolves once at least `count` messages arrived (rejects after `timeoutMs`). */
  waitFor: (count: number, timeoutMs?: number) => Promise<SinkMessage[]>;
  /**
   * The next `times` transactions are refused with `code` at RCPT TO or after DATA. Herald's own
   * account mail (from no-reply@…, sent at signup) is never refused, so it cannot use up a failure.
   */
  failNext: (f: { stage: 'rcpt' | 'data'; code: number; message?: string; times?: number }) => void;
  /** The next message to `to` is answered only after `ms` (a slow relay). */
  slowFor: (to: string, ms: number) => void;
  stop: () => Promise<void>;
};

/** A real SMTP server on loopback that keeps every message it accepts, parsed with mailparser. */
export async function startSmtpSink(): Promise<SmtpSink> {
  const messages: SinkMessage[] = [];
  const failures: Failure[] = [];
  const waiters: (() => void)[] = [];
  const slow = new Map<string, number>();
  const takeFailure = (stage: Failure['stage'], mailFrom: string) => {
    if (mailFrom.startsWith('no-reply@')) return null;
    const f = failures[0];
    if (!f || f.stage !== stage) return null;
    if (--f.times === 0) failures.shift();
    return Object.assign(new Error(f.message), { responseCode: f.code });
  };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    size: 60 * 1024 * 1024,
    onRcptTo(_address, session, cb) {
      cb(takeFailure('rcpt', session.envelope.mailFrom ? session.envelope.mailFrom.address : '') ?? undefined);
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', async () => {
        const failure = takeFailure('data', session.envelope.mailFrom ? session.envelope.mailFrom.address : '');
        if (failure) return cb(failure);
        const raw = Buffer.concat(chunks);
        const envelope = {
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
        };
        const delay = slow.get(envelope.to[0]);
        if (delay !== undefined) {
          slow.delete(envelope.to[0]);
          await new Promise((r) => setTimeout(r, delay));
        }
        messages.push({ raw, parsed: await simpleParser(raw), envelope });
        waiters.splice(0).forEach((w) => w());
        cb();
      });
    },
  });
  // A client that vanishes mid-session (a worker killed by a test) resets its socket: not the sink's failure.
  server.on('error', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.server.address();
  if (!address || typeof address !== 'object') throw new Error('no address');
  return {
    url: `smtp://127.0.0.1:${address.port}`,
    messages,
    waitFor: async (count, timeoutMs = 15_000) => {
      const deadline = Date.now() + timeoutMs;
      while (messages.length < count) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`SMTP sink: expected ${count} messages, got ${messages.length}`);
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, Math.min(left, 200));
          waiters.push(() => {
            clearTimeout(t);
            resolve();
          });
        });
      }
      return messages;
    },
    failNext: ({ stage, code, message, times = 1 }) => failures.push({ stage, code, message: message ?? `${code} refused by test sink`, times }),
    slowFor: (to, ms) => void slow.set(to, ms),
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** mailauth's DKIM verdict for a message, resolving keys through the given DNS server ("ip:port"). */
export async function dkimResult(raw: Buffer, dnsAddress: string): Promise<{ result: string; domain: string; why: string }> {
  const resolver = new Resolver();
  resolver.setServers([dnsAddress]);
  const verdict = await dkimVerify(raw, {
    resolver: (name: string, type: string) => resolver.resolve(name, type as 'TXT') as Promise<never>,
  });
  const first = verdict.results[0];
  // `why` (mailauth's comment, e.g. "body hash did not verify") explains a fail in an assertion message.
  const status = (first?.status ?? {}) as { result?: string; comment?: string };
  return { result: String(status.result ?? 'none'), domain: String(first?.signingDomain ?? ''), why: String(status.comment ?? '') };
}
