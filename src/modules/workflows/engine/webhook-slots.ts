/**
 * The webhook calls a runner makes at once, per project and in all (workflows/jobs.ts). A batch
 * takes a slot when it prepares a call; the runner gives it back when the call ends (or the batch
 * fails). A WEBHOOK step that found no slot waits (advance.ts moves its `due_at` a second on), and
 * is remembered here, so that a slot of its project given back makes it due again at once rather
 * than at the end of that second: a project with many calls to a quick receiver keeps its slots
 * busy.
 */

export type WebhookSlots = {
  /** One more call of the project, or false when its slots or all slots are taken. */
  take: (projectId: string) => boolean;
  give: (projectId: string) => void;
};

export type WaitingWebhook = { executionId: string; projectId: string; stepId: string };

/** Executions remembered per project: past these, a waiting step is looked at again after its second. */
const REMEMBERED_PER_PROJECT = 200;

export function createWebhookSlots(opts: { total: number; perProject: number }): WebhookSlots & {
  /** Steps a batch left without a slot. */
  noteWaiting: (waiting: WaitingWebhook[]) => void;
  /** Remembered steps that the free slots can take now, each answered once. */
  readyToRetry: () => WaitingWebhook[];
} {
  const takenBy = new Map<string, number>();
  let taken = 0;
  const waitingBy = new Map<string, Map<string, WaitingWebhook>>();
  const freeFor = (projectId: string) => Math.min(opts.total - taken, opts.perProject - (takenBy.get(projectId) ?? 0));
  return {
    take: (projectId) => {
      if (freeFor(projectId) <= 0) return false;
      takenBy.set(projectId, (takenBy.get(projectId) ?? 0) + 1);
      taken++;
      return true;
    },
    give: (projectId) => {
      const left = (takenBy.get(projectId) ?? 1) - 1;
      if (left > 0) takenBy.set(projectId, left);
      else takenBy.delete(projectId);
      taken--;
    },
    noteWaiting: (waiting) => {
      for (const w of waiting) {
        const steps = waitingBy.get(w.projectId) ?? new Map<string, WaitingWebhook>();
        if (steps.size < REMEMBERED_PER_PROJECT) steps.set(w.executionId, w);
        waitingBy.set(w.projectId, steps);
      }
    },
    readyToRetry: () => {
      const ready: WaitingWebhook[] = [];
      for (const [projectId, steps] of waitingBy) {
        let room = Math.min(freeFor(projectId), opts.total - taken - ready.length);
        for (const [executionId, w] of steps) {
          if (room-- <= 0) break;
          ready.push(w);
          steps.delete(executionId);
        }
        if (steps.size === 0) waitingBy.delete(projectId);
      }
      return ready;
    },
  };
}
