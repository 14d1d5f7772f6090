import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createWebhookSlots } from '../src/modules/workflows/engine/webhook-slots.ts';

/**
 * The runner's webhook slots alone (engine/webhook-slots.ts), on a clock of the test's: who a freed
 * slot is promised to, and for how long. workflows.webhook-fairness shows the same through a runner.
 */

const step = (projectId: string, n: number) => ({ projectId, executionId: `${projectId}-${n}`, stepId: 'w' });

function slotsAt() {
  let t = 0;
  const slots = createWebhookSlots({ total: 4, perProject: 2, now: () => t });
  return { slots, advance: (ms: number) => (t += ms) };
}

test('a freed slot is promised to the waiting project with the fewest calls under way; no one else takes it meanwhile', () => {
  const { slots } = slotsAt();
  for (const p of ['a', 'a', 'b', 'b']) assert.equal(slots.take(p, `${p}-x`), true);
  assert.equal(slots.take('c', 'c-1'), false, 'all four slots taken');
  slots.noteWaiting([step('a', 3), step('b', 3), step('c', 1)]);
  assert.deepEqual(slots.readyToRetry(), [], 'nothing free yet');

  slots.give('a');
  assert.deepEqual(slots.readyToRetry(), [step('c', 1)], 'c has no call under way; a has one');
  assert.equal(slots.take('a', 'a-3'), false, 'promised to c');
  assert.equal(slots.take('c', 'c-1'), true);
  assert.deepEqual(slots.readyToRetry(), []);

  slots.give('b');
  assert.deepEqual(slots.readyToRetry(), [step('a', 3)], 'a and b have one each: the first to wait');
  assert.equal(slots.take('a', 'a-3'), true);
});

test('a promise not taken within 2 s frees its slot for anyone', () => {
  const { slots, advance } = slotsAt();
  for (const p of ['a', 'a', 'b', 'b']) slots.take(p, `${p}-x`);
  slots.noteWaiting([step('c', 1)]);
  slots.give('a');
  assert.deepEqual(slots.readyToRetry(), [step('c', 1)]);
  advance(1_999);
  assert.equal(slots.take('b', 'b-3'), false, 'still promised to c');
  advance(1);
  assert.equal(slots.take('b', 'b-3'), false, 'b has its two');
  assert.equal(slots.take('a', 'a-3'), true, 'the promise ran out: free for a');
});

test('a step that got a slot on its own is forgotten: nothing is promised for it', () => {
  const { slots } = slotsAt();
  for (const p of ['a', 'a', 'b', 'b']) slots.take(p, `${p}-x`);
  slots.noteWaiting([step('c', 1)]);
  slots.give('b');
  slots.give('b');
  // Two free: one promised to c (its step is made due), the other free.
  assert.deepEqual(slots.readyToRetry(), [step('c', 1)]);
  assert.equal(slots.take('c', 'c-2'), true, 'c takes its promise with another step');
  assert.equal(slots.take('c', 'c-1'), true, 'and the free slot with the remembered one');
  slots.give('c');
  assert.deepEqual(slots.readyToRetry(), [], 'c-1 is no longer waiting');
  assert.equal(slots.take('b', 'b-4'), true);
});
