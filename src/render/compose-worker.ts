import { parentPort, workerData } from 'node:worker_threads';
import { keepParsedPrivateKeys } from '../mail/dkim-key-cache.ts';
import { type ComposedHtml, type ComposedSource, composeHtml } from './compose-html.ts';
import type { ThreadInput } from './compose-pool.ts';
import { checkTemplates } from './engine.ts';

type Request = { id: number; input: ThreadInput };

keepParsedPrivateKeys();

/** Set by the pool: a job whose id is below it was recalled and is not started (compose-pool.ts, Slot.recall). */
const recall = (workerData as { recall: BigInt64Array }).recall;

/**
 * The message source's memory moves to the event loop instead of being copied. A Buffer that is a
 * view into a larger ArrayBuffer (Node's pool of small buffers) is copied first: posting a view
 * copies its whole ArrayBuffer, and the pool's cannot be transferred.
 */
function transferable(result: ComposedHtml | ComposedSource): { result: ComposedHtml | ComposedSource; transfer: ArrayBuffer[] } {
  if (!('raw' in result)) return { result, transfer: [] };
  const raw = result.raw.byteOffset === 0 && result.raw.byteLength === result.raw.buffer.byteLength ? result.raw : new Uint8Array(result.raw);
  return { result: { ...result, raw }, transfer: [raw.buffer as ArrayBuffer] };
}

/**
 * A compose thread: renders, builds and signs messages so no template, filter, HTML or RSA
 * signature can stall the event loop, and checks the templates too large to parse there. The pool posts several requests ahead; they run one at a
 * time, in order, each timed by the pool from its `started` reply; a job the pool recalled is
 * answered `recalled` and not started.
 */
async function compose(req: Request): Promise<void> {
  if (BigInt(req.id) < Atomics.load(recall, 0)) {
    parentPort!.postMessage({ id: req.id, recalled: true });
    return;
  }
  // The hard limit counts from here: starting the thread (loading modules) is not the message's cost.
  parentPort!.postMessage({ id: req.id, started: true });
  const started = performance.now();
  const ms = () => performance.now() - started;
  try {
    if ('check' in req.input) {
      parentPort!.postMessage({ id: req.id, result: checkTemplates(req.input.check), ms: ms() });
      return;
    }
    const { result, transfer } = transferable(await composeHtml(req.input));
    parentPort!.postMessage({ id: req.id, result, ms: ms() }, transfer);
  } catch (err) {
    const e = err as Error & { field?: string };
    parentPort!.postMessage({ id: req.id, ms: ms(), error: { name: e.name ?? 'Error', message: String(e.message ?? err), field: e.field } });
  }
}

let previous = Promise.resolve();
parentPort!.on('message', (req: Request) => {
  previous = previous.then(() => compose(req));
});
