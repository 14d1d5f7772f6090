import { busyAtLimit } from './errors.ts';

/**
 * Work of one kind under way in a process, counted per project and in all, for work that holds a
 * shared resource until it ends (a compose thread, a download's memory): `take` counts one more
 * for the project, or answers 429 RATE_LIMIT_EXCEEDED at once past either bound, before any work.
 */
export type BusySlots = {
  /** Counts one for the project, or throws the 429; the returned release may be called more than once. */
  take(projectId: string): () => void;
  /** Under way for the project, or in all. */
  inFlight(projectId?: string): number;
};

const RETRY_AFTER_SECONDS = 1;

export function busySlots(opts: { perProject: number; perProcess: number; projectBusy: string; processBusy: string }): BusySlots {
  const byProject = new Map<string, number>();
  let total = 0;
  return {
    take(projectId) {
      const ofProject = byProject.get(projectId) ?? 0;
      if (ofProject >= opts.perProject) throw busy(opts.projectBusy, opts.perProject);
      if (total >= opts.perProcess) throw busy(opts.processBusy, opts.perProcess);
      byProject.set(projectId, ofProject + 1);
      total++;
      let released = false;
      return () => {
        if (released) return;
        released = true;
        total--;
        const left = (byProject.get(projectId) ?? 1) - 1;
        if (left > 0) byProject.set(projectId, left);
        else byProject.delete(projectId);
      };
    },
    inFlight: (projectId) => (projectId === undefined ? total : (byProject.get(projectId) ?? 0)),
  };
}

const busy = (reason: string, limit: number) => busyAtLimit(reason, limit, RETRY_AFTER_SECONDS);
