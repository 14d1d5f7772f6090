import { parentPort } from 'node:worker_threads';
import { type ComposeHtmlInput, composeHtml } from './compose-html.ts';

/** A compose thread: renders messages so no template, filter or HTML can stall the event loop. */
parentPort!.on('message', async (req: { id: number; input: ComposeHtmlInput }) => {
  // The hard limit counts from here: starting the thread (loading modules) is not the message's cost.
  parentPort!.postMessage({ id: req.id, started: true });
  try {
    parentPort!.postMessage({ id: req.id, result: await composeHtml(req.input) });
  } catch (err) {
    const e = err as Error & { field?: string };
    parentPort!.postMessage({ id: req.id, error: { name: e.name ?? 'Error', message: String(e.message ?? err), field: e.field } });
  }
});
