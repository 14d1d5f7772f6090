import { uuidv7 } from '../src/db/ids.ts';
import { keepParsedPrivateKeys } from '../src/mail/dkim-key-cache.ts';
import { poolSendRate } from './lib.ts';

/**
 * The reference pipeline of issue 15 (targets 1 and 2): for each message, Liquid renders subject
 * and body, html-to-text makes the text part, MailComposer builds the MIME source, mailauth signs
 * it (the parsed key kept, as Herald's signer does), and a nodemailer pool of the same size sends
 * it. The build runs on this thread while the pool sends; no database. `subject` and `body` are
 * Herald templates: `{{name ?? "fallback"}}` becomes Liquid's `default` filter.
 */
export async function libraryPipelineRate(opts: {
  url: string;
  poolSize: number;
  total: number;
  privateKeyPem: string;
  domain: string;
  from: string;
  subject: string;
  body: string;
  to: (i: number) => string;
  vars: (i: number) => Record<string, unknown>;
}): Promise<{ rate: number; cpuMs: string }> {
  const { Liquid } = await import('liquidjs');
  const { plainText } = await import('../src/mail/build-message.ts');
  // MailComposer compiles the tree; Herald's tree writer (byte-for-byte nodemailer's build, faster
  // than its streams) writes it, as in every session's reference since the seventh. Herald's own
  // writer for HTML and text messages (writeAlternativeMessage) is not used here.
  const MailComposer = (await import('nodemailer/lib/mail-composer')).default;
  const { writeMimeTree } = await import('../src/mail/mime-writer.ts');
  // mailauth's own entry point, so the reference stays the library's cost whatever Herald's signer does.
  const { dkimSign } = await import('mailauth/lib/dkim/sign.js');
  keepParsedPrivateKeys();
  const liquid = new Liquid();
  const liquidSource = (template: string) => template.replace(/\{\{\s*(\w+)\s*\?\?\s*("[^"]*")\s*\}\}/g, '{{$1 | default: $2}}');
  const body = liquid.parse(liquidSource(opts.body));
  const subject = liquid.parse(liquidSource(opts.subject));
  const signature = {
    signingDomain: opts.domain,
    selector: 'herald',
    privateKey: opts.privateKeyPem,
    canonicalization: 'relaxed/relaxed',
    algorithm: 'rsa-sha256',
  };
  const build = async (i: number): Promise<Buffer> => {
    const vars = opts.vars(i);
    const html = liquid.renderSync(body, vars) as string;
    const tree = new MailComposer({
      messageId: `<${uuidv7()}@${opts.domain}>`,
      date: new Date(),
      from: opts.from,
      to: opts.to(i),
      subject: liquid.renderSync(subject, vars) as string,
      html,
      text: plainText(html),
      headers: {},
      disableFileAccess: true,
      disableUrlAccess: true,
    }).compile();
    const unsigned = writeMimeTree(tree) ?? (await tree.build());
    const signed = await dkimSign(unsigned, { ...signature, signatureData: [signature], signTime: new Date() });
    if (signed.errors.length > 0 || !signed.signatures.trim()) throw new Error(`the reference pipeline did not sign: ${String(signed.errors[0])}`);
    return Buffer.concat([Buffer.from(signed.signatures), unsigned]);
  };
  const cpuBefore = process.cpuUsage();
  const rate = await poolSendRate({ url: opts.url, poolSize: opts.poolSize, total: opts.total, from: opts.from, to: opts.to, source: build });
  return { rate, cpuMs: cpuMsPer(process.cpuUsage(cpuBefore), opts.total) };
}

/** CPU time (user + system) per message, in ms: unlike a rate, barely moved by other load on the machine. */
export const cpuMsPer = (used: NodeJS.CpuUsage, messages: number) => ((used.user + used.system) / 1000 / messages).toFixed(2);
