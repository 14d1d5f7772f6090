import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ApiError } from '../src/http/errors.ts';
import { PREVIEWS_PER_PROCESS, PREVIEWS_PER_PROJECT, previewSlots } from '../src/modules/templates/preview.ts';

/** The counters behind POST /templates/preview's 429 (through HTTP: test/templates.preview-limits.test.ts). */

/** assert.throws's check: the 429 of a full count, with its message and details. */
const busy = (limit: number, message: string) => (err: unknown) => {
  assert.ok(err instanceof ApiError);
  assert.equal(err.statusCode, 429);
  assert.equal(err.code, 'RATE_LIMIT_EXCEEDED');
  assert.equal(err.message, message);
  assert.deepEqual(err.details, { retryAfter: 1, limit });
  return true;
};

test('the limits: two previews a project, sixteen in all', () => {
  assert.equal(PREVIEWS_PER_PROJECT, 2);
  assert.equal(PREVIEWS_PER_PROCESS, 16);
});

test('per project first, then for the whole process; a release counts once', () => {
  const slots = previewSlots(2, 3);
  const first = slots.take('p1');
  slots.take('p1');
  assert.throws(() => slots.take('p1'), busy(2, 'This project already has 2 previews rendering; try again in 1 second'));
  const other = slots.take('p2');
  assert.equal(slots.inFlight(), 3);
  assert.throws(() => slots.take('p3'), busy(3, 'The server is busy rendering previews; try again in 1 second'));
  assert.equal(slots.inFlight(), 3, 'a refusal takes nothing');

  first();
  first();
  assert.equal(slots.inFlight('p1'), 1);
  assert.equal(slots.inFlight(), 2, 'a second call of the same release gives back nothing more');
  slots.take('p3');
  assert.throws(() => slots.take('p4'), busy(3, 'The server is busy rendering previews; try again in 1 second'));
  other();
  assert.equal(slots.inFlight('p2'), 0);
  slots.take('p1');
  assert.equal(slots.inFlight('p1'), 2);
  assert.equal(slots.inFlight(), 3);
});
