import { Transform } from 'node:stream';
import { ApiError } from './errors.ts';

/**
 * JSON.parse builds every key and value of a body on the event loop, and its cost grows with their
 * number, not with the bytes: a 55 MB `/v1/send` body of `{}`s held the loop 15 s and took 3.4 GB.
 * So a body's keys and values and its nesting are counted before it is parsed, as it arrives.
 * 100,000 of them, of the costliest kind (objects of distinct keys), parse in about 30 ms; the
 * largest legitimate body (1,000 emails of a bulk call, a 500-filter condition) holds a few thousand.
 */
export const MAX_JSON_VALUES = 100_000;
/** Far past the deepest the API takes (contact data: 64 levels, a condition: 10, three JSON levels each), whose own errors say more. */
export const MAX_JSON_DEPTH = 256;

/** A body whose content-length is at most this is counted whole by the parser, not chunk by chunk. */
export const COUNT_WHOLE_BELOW = 64 * 1024;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Counts the keys and values of a JSON text (each string, number, literal, object and array is
 * one) and its depth, over chunks split anywhere. Inside strings it only looks for the closing
 * quote. Malformed text is counted loosely: JSON.parse refuses it afterwards.
 */
export class JsonShape {
  values = 0;
  depth = 0;
  private inString = false;
  /** Inside a string: how many backslashes came right before the scan position. */
  private backslashes = 0;
  private inScalar = false;

  /** Counts the next bytes; the bound they went past, or null. */
  push(bytes: Buffer): 'values' | 'depth' | null {
    const n = bytes.length;
    let i = 0;
    while (i < n) {
      if (this.inString) {
        const quote = bytes.indexOf(QUOTE, i);
        const end = quote === -1 ? n : quote;
        let j = end - 1;
        while (j >= i && bytes[j] === BACKSLASH) j--;
        const run = end - 1 - j + (j < i ? this.backslashes : 0);
        if (quote === -1) {
          this.backslashes = run;
          return null;
        }
        this.backslashes = 0;
        if (run % 2 === 0) this.inString = false; // an odd run escapes the quote
        i = quote + 1;
        continue;
      }
      switch (bytes[i++]) {
        case 0x7b: // {
        case 0x5b: // [
          this.values++;
          this.inScalar = false;
          if (++this.depth > MAX_JSON_DEPTH) return 'depth';
          break;
        case 0x7d: // }
        case 0x5d: // ]
          this.depth--;
          this.inScalar = false;
          break;
        case QUOTE:
          this.values++;
          this.inString = true;
          this.backslashes = 0;
          this.inScalar = false;
          break;
        case 0x2c: // ,
        case 0x3a: // :
        case 0x20:
        case 0x0a:
        case 0x0d:
        case 0x09:
          this.inScalar = false;
          break;
        default: // a number or a literal
          if (this.inScalar) continue;
          this.values++;
          this.inScalar = true;
      }
      if (this.values > MAX_JSON_VALUES) return 'values';
    }
    return null;
  }
}

export function jsonShapeError(bound: 'values' | 'depth'): ApiError {
  return bound === 'values'
    ? new ApiError(413, 'PAYLOAD_TOO_LARGE', `Request body has more than ${MAX_JSON_VALUES.toLocaleString('en-US')} JSON keys and values`, {
        details: { maxValues: MAX_JSON_VALUES },
      })
    : new ApiError(413, 'PAYLOAD_TOO_LARGE', `Request body nests JSON more than ${MAX_JSON_DEPTH} levels deep`, {
        details: { maxDepth: MAX_JSON_DEPTH },
      });
}

/** Throws the 413 when a whole body goes past a bound. */
export function assertJsonShape(body: Buffer): void {
  const bound = new JsonShape().push(body);
  if (bound) throw jsonShapeError(bound);
}

/** Passes a body through as it arrives and fails it with the 413 at the first chunk past a bound. */
export function countingJsonShape(): Transform {
  const shape = new JsonShape();
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      const bound = shape.push(chunk);
      if (bound) callback(jsonShapeError(bound));
      else callback(null, chunk);
    },
  });
}
