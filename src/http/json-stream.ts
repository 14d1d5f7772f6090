import { Readable } from 'node:stream';

/**
 * A JSON array written as its batches of items (each item's JSON text) arrive, for a list the spec
 * does not paginate: the process holds one batch at a time, the event loop turns between batches,
 * and a slow reader pauses the reads (backpressure by bytes) instead of the answer piling up in
 * memory. A failure after the first byte ends the answer early (cut JSON), as any streamed body would.
 */
export function jsonArrayStream(batches: AsyncIterable<string[]>): Readable {
  async function* text(): AsyncGenerator<string> {
    let first = true;
    yield '[';
    for await (const batch of batches) {
      if (batch.length === 0) continue;
      yield (first ? '' : ',') + batch.join(',');
      first = false;
    }
    yield ']';
  }
  return Readable.from(text(), { objectMode: false });
}
