import { parentPort } from 'node:worker_threads';
import { dkimSignatureFor } from './dkim-sign.ts';
import { keepParsedPrivateKeys } from './dkim-key-cache.ts';

/** Runs in a worker thread: DKIM-signs messages so RSA work does not block the event loop. */
type SignRequest = { id: number; raw: Uint8Array; domain: string; selector: string; privateKeyPem: string };

keepParsedPrivateKeys();

parentPort!.on('message', async (req: SignRequest) => {
  try {
    const raw = Buffer.from(req.raw.buffer, req.raw.byteOffset, req.raw.byteLength);
    const result = await dkimSignatureFor({ raw, domain: req.domain, selector: req.selector, privateKeyPem: req.privateKeyPem });
    parentPort!.postMessage({ id: req.id, signatures: 'signatures' in result ? result.signatures : null, error: 'error' in result ? result.error : null });
  } catch (err) {
    parentPort!.postMessage({ id: req.id, signatures: null, error: String((err as Error).message ?? err) });
  }
});
