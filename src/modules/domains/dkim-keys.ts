import { createCipheriv, createDecipheriv, generateKeyPair, hkdfSync, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { perSecret } from '../../tokens/per-secret.ts';

/** The DKIM selector of every Herald domain: the key is published at `herald._domainkey.<domain>`. */
export const DKIM_SELECTOR = 'herald';

const generateKeyPairAsync = promisify(generateKeyPair);

export type DkimKeyPair = {
  /** Base64 SPKI DER: the `p=` tag of the DKIM record. */
  publicKey: string;
  privateKeyPem: string;
};

/** A fresh 2048-bit RSA key pair (generated off the event loop). */
export async function generateDkimKey(): Promise<DkimKeyPair> {
  const { publicKey, privateKey } = await generateKeyPairAsync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'der' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { publicKey: publicKey.toString('base64'), privateKeyPem: privateKey };
}

export const dkimRecordValue = (publicKey: string) => `v=DKIM1; k=rsa; p=${publicKey}`;

const IV_BYTES = 12;
const TAG_BYTES = 16;
/** The AES-256 key that encrypts DKIM private keys at rest, derived from JWT_SECRET. */
const encryptionKey = perSecret((secret) => Buffer.from(hkdfSync('sha256', Buffer.from(secret, 'utf8'), Buffer.alloc(0), 'herald dkim', 32)));

/** base64(iv ‖ tag ‖ ciphertext), AES-256-GCM. */
export function encryptPrivateKey(pem: string, secret: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', encryptionKey(secret), iv);
  const ciphertext = Buffer.concat([cipher.update(pem, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), ciphertext]).toString('base64');
}

/** Throws when the blob was encrypted under another secret or was tampered with. */
export function decryptPrivateKey(blob: string, secret: string): string {
  const raw = Buffer.from(blob, 'base64');
  const iv = raw.subarray(0, IV_BYTES);
  const tag = raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES);
  const decipher = createDecipheriv('aes-256-gcm', encryptionKey(secret), iv);
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
}
