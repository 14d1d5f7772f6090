import { parentPort } from 'node:worker_threads';
import { type ComposeHtmlInput, composeHtml } from './compose-html.ts';

type Request = { id: number; input: ComposeHtmlInput };

/**
 * A compose thread: renders messages so no template, filter or HTML can stall the event loop. The
 * pool posts several requests ahead; they run one at a time, in order, each timed by the pool from
 * its `started` reply.
 */
async function compose(req: Request): Promise<void> {
  // The hard limit counts from here: starting the thread (loading modules) is not the message's cost.
  parentPort!.postMessage({ id: req.id, started: true });
  try {
    parentPort!.postMessage({ id: req.id, result: await composeHtml(req.input) });
  } catch (err) {
    const e = err as Error & { field?: string };
    parentPort!.postMessage({ id: req.id, error: { name: e.name ?? 'Error', message: String(e.message ?? err), field: e.field } });
  }
}

let previous = Promise.resolve();
parentPort!.on('message', (req: Request) => {
  previous = previous.then(() => compose(req));
});
