import { parentPort } from 'node:worker_threads';
import { dkimSign } from 'mailauth';

/** Runs in a worker thread: DKIM-signs messages so RSA work does not block the event loop. */
type SignRequest = { id: number; raw: Uint8Array; domain: string; selector: string; privateKeyPem: string };

parentPort!.on('message', async (req: SignRequest) => {
  try {
    const signature = { signingDomain: req.domain, selector: req.selector, privateKey: req.privateKeyPem, canonicalization: 'relaxed/relaxed', algorithm: 'rsa-sha256' };
    const result = await dkimSign(Buffer.from(req.raw.buffer, req.raw.byteOffset, req.raw.byteLength), { ...signature, signatureData: [signature] });
    const error = result.errors?.length || !result.signatures.trim() ? String(result.errors?.[0] ?? 'no signature produced') : null;
    parentPort!.postMessage({ id: req.id, signatures: error ? null : result.signatures, error });
  } catch (err) {
    parentPort!.postMessage({ id: req.id, signatures: null, error: String((err as Error).message ?? err) });
  }
});
