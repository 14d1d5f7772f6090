import nodemailer from 'nodemailer';
import type { Config } from '../config.ts';

export type Envelope = { from: string; to: string };

/** What happened to one message handed to a transport. */
export type SendOutcome =
  | { kind: 'accepted'; response: string }
  /** The server refused the recipient for good (5xx on RCPT TO): a hard bounce. */
  | { kind: 'rejected'; response: string }
  /** The server refused the message for good (5xx elsewhere). */
  | { kind: 'failed'; response: string }
  /** 4xx, connection or timeout: try again later. */
  | { kind: 'transient'; response: string };

export type Transport = {
  /** `capture` stores messages instead of delivering them (no SMTP_URL). */
  mode: 'smtp' | 'capture';
  send: (raw: Buffer, envelope: Envelope) => Promise<SendOutcome>;
  close: () => Promise<void>;
};

type SmtpError = Error & { responseCode?: number; response?: string; command?: string; code?: string };

export function classifySmtpError(err: SmtpError): SendOutcome {
  const response = err.response ?? err.message;
  const code = err.responseCode ?? 0;
  if (code >= 500 && code < 600) {
    const recipient = err.command === 'RCPT TO' || err.code === 'EENVELOPE';
    return { kind: recipient ? 'rejected' : 'failed', response };
  }
  return { kind: 'transient', response };
}

export function createTransport(config: Config): Transport {
  if (!config.smtpUrl) {
    return { mode: 'capture', send: async () => ({ kind: 'accepted', response: 'captured' }), close: async () => {} };
  }
  const smtp = nodemailer.createTransport({
    url: config.smtpUrl,
    pool: true,
    maxConnections: config.smtpPoolSize,
    maxMessages: 1000,
    connectionTimeout: 15_000,
    greetingTimeout: 15_000,
    socketTimeout: 60_000,
  });
  return {
    mode: 'smtp',
    send: async (raw, envelope) => {
      try {
        const info = await smtp.sendMail({ envelope: { from: envelope.from, to: [envelope.to] }, raw });
        return { kind: 'accepted', response: String(info.response ?? '') };
      } catch (err) {
        return classifySmtpError(err as SmtpError);
      }
    },
    close: async () => smtp.close(),
  };
}
