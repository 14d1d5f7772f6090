import assert from 'node:assert/strict';
import type { Api } from './http.ts';

/** Building workflows through the API, for the workflow engine tests. */

export type StepSpec = { key: string; type: string; config?: Record<string, unknown> };
export type EdgeSpec = [from: string, to: string, branch?: 'yes' | 'no' | 'event' | 'timeout'];

/** A moving clock for startTestServer: `advance(ms)` jumps it forward. */
export function testClock() {
  let offset = 0;
  return {
    now: () => new Date(Date.now() + offset),
    advance: (ms: number) => {
      offset += ms;
    },
  };
}

/**
 * Creates a workflow triggered by `eventName`, adds `steps`, links them (`trigger` names the TRIGGER
 * step), and enables it unless `enabled: false`. Returns the workflow id and the step ids by key.
 */
export async function buildWorkflow(
  sk: Api,
  opts: { name?: string; eventName: string; allowReentry?: boolean; steps: StepSpec[]; edges: EdgeSpec[]; enabled?: boolean },
): Promise<{ id: string; steps: Record<string, string> }> {
  const created = await sk.post('/workflows', {
    name: opts.name ?? `wf ${opts.eventName}`,
    eventName: opts.eventName,
    allowReentry: opts.allowReentry ?? false,
  });
  assert.equal(created.status, 201, created.text);
  const id: string = created.body.id;
  const trigger = created.body.steps.find((s: { type: string }) => s.type === 'TRIGGER');
  const steps: Record<string, string> = { trigger: trigger.id };
  for (const s of opts.steps) {
    const res = await sk.post(`/workflows/${id}/steps`, { type: s.type, config: s.config ?? {} });
    assert.equal(res.status, 201, res.text);
    steps[s.key] = res.body.id;
  }
  for (const [from, to, branch] of opts.edges) {
    const res = await sk.post(`/workflows/${id}/transitions`, { fromStepId: steps[from], toStepId: steps[to], ...(branch ? { branch } : {}) });
    assert.equal(res.status, 201, res.text);
  }
  if (opts.enabled !== false) {
    const res = await sk.patch(`/workflows/${id}`, { enabled: true });
    assert.equal(res.status, 200, res.text);
  }
  return { id, steps };
}

export async function waitFor<T>(what: string, fn: () => Promise<T | undefined | null | false>, timeoutMs = 60_000, stepMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}
