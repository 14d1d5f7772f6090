/**
 * The webhook calls a runner makes at once, per project and in all (workflows/jobs.ts). A batch
 * takes a slot when it prepares a call; the runner gives it back when the call ends (or the batch
 * fails). A WEBHOOK step that found no slot waits (advance.ts moves its `due_at` a second on), and
 * is remembered here.
 *
 * A slot given back is promised at once to the waiting project with the fewest calls under way,
 * and that project's remembered step is made due again: other projects cannot take it meanwhile.
 * So a project with many calls to a quick receiver keeps its slots busy, and projects whose
 * receivers hang do not keep every slot for themselves: the first call of theirs to end lets a
 * waiting project in, however many of their own steps wait.
 */

export type WebhookSlots = {
  /** One more call of the project, for this execution's step; false when its slots or all slots are taken or promised to others. */
  take: (projectId: string, executionId: string) => boolean;
  give: (projectId: string) => void;
};

export type WaitingWebhook = { executionId: string; projectId: string; stepId: string };

/** Executions remembered per project: past these, a waiting step is looked at again after its second. */
const REMEMBERED_PER_PROJECT = 200;
/** A promised slot not taken by then (its step was done otherwise, or left for room) is free again. */
const PROMISE_MS = 2_000;

export function createWebhookSlots(opts: { total: number; perProject: number; now?: () => number }): WebhookSlots & {
  /** Steps a batch left without a slot. */
  noteWaiting: (waiting: WaitingWebhook[]) => void;
  /** Remembered steps promised a slot since the last call, each answered once. */
  readyToRetry: () => WaitingWebhook[];
} {
  const now = opts.now ?? (() => performance.now());
  const takenBy = new Map<string, number>();
  let taken = 0;
  const waitingBy = new Map<string, Map<string, WaitingWebhook>>();
  const promises: { projectId: string; until: number }[] = []; // oldest first
  const promisedBy = new Map<string, number>();
  const ready: WaitingWebhook[] = [];

  const count = (m: Map<string, number>, projectId: string, by: number) => {
    const n = (m.get(projectId) ?? 0) + by;
    if (n > 0) m.set(projectId, n);
    else m.delete(projectId);
  };
  const usedBy = (projectId: string) => (takenBy.get(projectId) ?? 0) + (promisedBy.get(projectId) ?? 0);
  const dropExpiredPromises = () => {
    const t = now();
    while (promises.length > 0 && promises[0].until <= t) count(promisedBy, promises.shift()!.projectId, -1);
  };
  // Free slots go to waiting projects, the one with the fewest calls under way or promised first.
  const promiseFreeSlots = () => {
    dropExpiredPromises();
    while (taken + promises.length < opts.total) {
      let lightest: string | undefined;
      for (const projectId of waitingBy.keys()) {
        const used = usedBy(projectId);
        if (used < opts.perProject && (lightest === undefined || used < usedBy(lightest))) lightest = projectId;
      }
      if (lightest === undefined) return;
      const steps = waitingBy.get(lightest)!;
      const [executionId, step] = steps.entries().next().value!;
      steps.delete(executionId);
      if (steps.size === 0) waitingBy.delete(lightest);
      ready.push(step);
      promises.push({ projectId: lightest, until: now() + PROMISE_MS });
      count(promisedBy, lightest, 1);
    }
  };

  return {
    take: (projectId, executionId) => {
      dropExpiredPromises();
      if (promisedBy.has(projectId)) {
        promises.splice(
          promises.findIndex((p) => p.projectId === projectId),
          1,
        );
        count(promisedBy, projectId, -1);
      } else if (taken + promises.length >= opts.total || usedBy(projectId) >= opts.perProject) return false;
      count(takenBy, projectId, 1);
      taken++;
      // A remembered step that got its slot waits no more.
      const steps = waitingBy.get(projectId);
      if (steps?.delete(executionId) && steps.size === 0) waitingBy.delete(projectId);
      return true;
    },
    give: (projectId) => {
      count(takenBy, projectId, -1);
      taken--;
      promiseFreeSlots();
    },
    noteWaiting: (waiting) => {
      for (const w of waiting) {
        const steps = waitingBy.get(w.projectId) ?? new Map<string, WaitingWebhook>();
        if (steps.size < REMEMBERED_PER_PROJECT) steps.set(w.executionId, w);
        waitingBy.set(w.projectId, steps);
      }
    },
    readyToRetry: () => {
      promiseFreeSlots();
      return ready.splice(0);
    },
  };
}
