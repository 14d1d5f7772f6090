import { randomBytes, randomInt } from 'node:crypto';

let lastMs = 0;
let sequence = 0;

// Random bytes drawn 4 KB at a time and handed out 16 at a time, each slice once: one call into
// the CSPRNG made every id cost 2.5 µs, most of it the call (crypto.randomUUID caches the same way).
const RANDOM_POOL_BYTES = 4096;
let randomPool = Buffer.alloc(0);
let randomOffset = 0;

function random16(): Buffer {
  if (randomOffset + 16 > randomPool.length) {
    randomPool = randomBytes(RANDOM_POOL_BYTES);
    randomOffset = 0;
  }
  randomOffset += 16;
  return randomPool.subarray(randomOffset - 16, randomOffset);
}

/**
 * RFC 9562 UUID version 7: time-ordered, so ids sort by creation time. Within one process, ids made
 * in the same millisecond still increase (a 12-bit counter in rand_a, RFC 9562 § 6.2 method 1).
 */
export function uuidv7(now = Date.now()): string {
  const b = random16();
  if (now <= lastMs) {
    sequence += 1;
    if (sequence > 0xfff) {
      lastMs += 1;
      sequence = 0;
    }
    now = lastMs;
  } else {
    lastMs = now;
    sequence = b.readUInt16BE(6) & 0x7ff; // random start, leaving room to count up
  }
  b.writeUIntBE(now, 0, 6);
  b.writeUInt16BE(0x7000 | sequence, 6);
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export type IdPrefix = 'cnt' | 'evt' | 'imp' | 'blk' | 'usr' | 'prj';

/** `cnt_…`-style id: the prefix and a time-ordered 32-hex-digit body. */
export function prefixedId(prefix: IdPrefix): string {
  return `${prefix}_${uuidv7().replaceAll('-', '')}`;
}

export const PREFIXED_ID = (prefix: IdPrefix) => new RegExp(`^${prefix}_[0-9a-f]{32}$`);

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

export function randomBase62(length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += BASE62[randomInt(62)];
  return out;
}
