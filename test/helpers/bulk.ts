import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Api } from './http.ts';

export type BulkJob = {
  jobId: string;
  type: string;
  status: string;
  total: number;
  processed: number;
  succeeded: number;
  unchanged: number;
  failed: number;
  errors: { id: string; reason: string }[];
  failureReason?: string;
  createdAt: string;
  completedAt: string | null;
};

/** Polls GET /contacts/bulk/:jobId until the job has completed or failed (fails the test after `timeoutMs`). */
export async function waitForJob(api: Api, jobId: string, timeoutMs = 30_000): Promise<BulkJob> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const res = await api.get<BulkJob>(`/contacts/bulk/${jobId}`);
    assert.equal(res.status, 200, res.text);
    if (res.body.status === 'completed' || res.body.status === 'failed') return res.body;
    await sleep(20);
  }
  throw new Error(`bulk job ${jobId} did not finish`);
}
