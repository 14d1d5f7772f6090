/**
 * Projects whose contact re-evaluations outran the quick lane recently, remembered in this process
 * (ctx.slowReevaluations): their next re-evaluations go straight to the slow lane
 * (segments/jobs.ts) instead of each spending the quick lane's bound first.
 */
export type SlowProjects = {
  isSlow: (projectId: string) => boolean;
  remember: (projectId: string) => void;
};

/** How long a project stays in the slow lane after it last outran the quick one. */
export const SLOW_PROJECT_MEMORY_MS = 10 * 60_000;
/** Projects remembered at most; past it, the oldest is forgotten (it then spends the quick bound once more). */
const MAX_REMEMBERED = 10_000;

export function slowProjects(now: () => number = Date.now): SlowProjects {
  const until = new Map<string, number>(); // in the order they were remembered
  return {
    isSlow: (projectId) => {
      const t = until.get(projectId);
      if (t === undefined) return false;
      if (t > now()) return true;
      until.delete(projectId);
      return false;
    },
    remember: (projectId) => {
      until.delete(projectId);
      if (until.size >= MAX_REMEMBERED) until.delete(until.keys().next().value!);
      until.set(projectId, now() + SLOW_PROJECT_MEMORY_MS);
    },
  };
}
