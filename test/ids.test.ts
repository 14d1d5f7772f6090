import assert from 'node:assert/strict';
import { test } from 'node:test';
import { UUID, prefixedId, uuidv7 } from '../src/db/ids.ts';

test('uuidv7: well formed, in creation order, and every id with random bits of its own (across the random pool refills)', () => {
  const ids = Array.from({ length: 10_000 }, () => uuidv7());
  for (const id of ids) {
    assert.match(id, UUID);
    assert.equal(id[14], '7', id); // version 7
    assert.match(id[19], /[89ab]/, id); // variant 10
  }
  assert.deepEqual([...ids].sort(), ids, 'sorted by creation');
  // The last 62 bits are random: an id sharing them with another reused random bytes.
  const tails = new Set(ids.map((id) => id.slice(19)));
  assert.equal(tails.size, ids.length);
  assert.match(prefixedId('evt'), /^evt_[0-9a-f]{32}$/);
});
