import { dkimSign } from 'mailauth';

export type DkimKey = { domain: string; selector: string; privateKeyPem: string };

/** Prepends a DKIM-Signature (relaxed/relaxed, rsa-sha256) for the sender domain. */
export async function signMessage(raw: Buffer, key: DkimKey): Promise<Buffer> {
  const signature = {
    signingDomain: key.domain,
    selector: key.selector,
    privateKey: key.privateKeyPem,
    canonicalization: 'relaxed/relaxed',
    algorithm: 'rsa-sha256',
  };
  const result = await dkimSign(raw, { ...signature, signatureData: [signature] });
  if (result.errors?.length || !result.signatures.trim()) {
    throw new Error(`DKIM signing failed: ${String(result.errors?.[0] ?? 'no signature produced')}`);
  }
  return Buffer.concat([Buffer.from(result.signatures), raw]);
}
