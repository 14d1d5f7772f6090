import { Readable } from 'node:stream';
import nodemailer from 'nodemailer';
import MimeNode from 'nodemailer/lib/mime-node';
import type { Config } from '../config.ts';
import { withFinalLineBreak } from './mime-writer.ts';

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

/**
 * `commit` runs after the whole message has been written to the relay and before the final dot
 * that asks it to accept: the caller records the hand-off there, so a worker that dies after the
 * relay accepted a message has always recorded that it may have. If `commit` throws, the message
 * is abandoned (the relay never gets the dot) and the outcome is transient.
 */
export type SendOptions = { commit?: () => Promise<void> };

export type Transport = {
  /** `capture` stores messages instead of delivering them (no SMTP_URL). */
  mode: 'smtp' | 'capture';
  send: (raw: Buffer, envelope: Envelope, options?: SendOptions) => Promise<SendOutcome>;
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

export function createTransport(config: Pick<Config, 'smtpUrl' | 'smtpPoolSize'>): Transport {
  if (!config.smtpUrl) {
    const send = async (_raw: Buffer, _envelope: Envelope, options?: SendOptions): Promise<SendOutcome> => {
      try {
        await options?.commit?.();
      } catch (err) {
        return { kind: 'transient', response: (err as Error).message };
      }
      return { kind: 'accepted', response: 'captured' };
    };
    return { mode: 'capture', send, close: async () => {} };
  }
  const smtp = nodemailer.createTransport({
    url: config.smtpUrl,
    pool: true,
    maxConnections: config.smtpPoolSize,
    maxMessages: 1000,
    connectionTimeout: 15_000,
    greetingTimeout: 15_000,
    socketTimeout: 60_000,
    // A message source is a one-shot stream (see poolMessage): a connection lost mid-message fails
    // the send (retried by the delivery engine) instead of being re-read empty by the pool.
    maxRequeues: 0,
  });
  // The pool itself (nodemailer's transport interface), not sendMail: for a raw source sendMail
  // still compiles a MIME node around it, generates a Message-ID and a boundary, and streams it
  // through a pipeline of three streams, per message (bench/README § campaign).
  const pool = smtp.transporter as unknown as PoolTransport;
  return {
    mode: 'smtp',
    send: async (raw, envelope, options) => {
      try {
        const info = await new Promise<{ response?: string }>((resolve, reject) =>
          pool.send(poolMessage(raw, envelope, options?.commit), (err, sent) => (err ? reject(err) : resolve(sent ?? {}))),
        );
        return { kind: 'accepted', response: String(info.response ?? '') };
      } catch (err) {
        return classifySmtpError(err as SmtpError);
      }
    },
    close: async () => smtp.close(),
  };
}

type PoolTransport = { send: (mail: PoolMessage, callback: (err: Error | null, info?: { response?: string }) => void) => void };

/** What nodemailer's SMTP pool reads of a message (its transport interface's MailMessage). */
type PoolMessage = {
  data: Record<string, never>;
  message: { getEnvelope: () => object; messageId: () => string; getHeader: (key: string) => string; createReadStream: () => Readable };
};

/** Normalizes envelope addresses as sendMail does (internationalized domains included); setEnvelope builds a new envelope each call. */
const envelopes = new MimeNode();

/**
 * A source as the pool sends it: as sendMail would have (the source ends with a line break, added
 * when missing), and, with `commit`, a stream whose end waits for it: nodemailer writes the final
 * dot only after the stream ends. A source is a one-shot stream (maxRequeues: 0).
 */
function poolMessage(raw: Buffer, envelope: Envelope, commit?: () => Promise<void>): PoolMessage {
  const smtpEnvelope = envelopes.setEnvelope({ from: envelope.from, to: [envelope.to] }).getEnvelope();
  const source = withFinalLineBreak(raw);
  const createReadStream = () =>
    commit
      ? Readable.from(
          (async function* () {
            yield source;
            await commit();
          })(),
          { objectMode: false },
        )
      : new Readable({
          read() {
            this.push(source);
            this.push(null);
          },
        });
  return { data: {}, message: { getEnvelope: () => smtpEnvelope, messageId: () => '', getHeader: () => '', createReadStream } };
}
