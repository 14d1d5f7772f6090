/**
 * Projects whose condition reads outran a shared lane's bound recently, remembered in one process:
 * their next work of that kind goes straight to a slow lane instead of each piece spending the
 * shared lane's bound first. Segment re-evaluations (ctx.slowReevaluations, segments/jobs.ts) and
 * the workflow runner's CONDITION steps (workflows/jobs.ts) each keep one.
 */
export type SlowProjects = {
  isSlow: (projectId: string) => boolean;
  remember: (projectId: string) => void;
  /** The projects remembered now, oldest first. */
  list: () => string[];
};

/** How long a project stays in the slow lane after it last outran the shared one. */
export const SLOW_PROJECT_MEMORY_MS = 10 * 60_000;

/** `most`: projects remembered at most; past it, the oldest is forgotten (it then spends the shared lane's bound once more). */
export function slowProjects(most = 10_000, now: () => number = Date.now): SlowProjects {
  const until = new Map<string, number>(); // in the order they were last remembered
  const forgetExpired = () => {
    const t = now();
    for (const [projectId, u] of until) {
      if (u > t) return;
      until.delete(projectId);
    }
  };
  return {
    isSlow: (projectId) => {
      forgetExpired();
      return until.has(projectId);
    },
    remember: (projectId) => {
      until.delete(projectId);
      if (until.size >= most) until.delete(until.keys().next().value!);
      until.set(projectId, now() + SLOW_PROJECT_MEMORY_MS);
    },
    list: () => {
      forgetExpired();
      return [...until.keys()];
    },
  };
}
