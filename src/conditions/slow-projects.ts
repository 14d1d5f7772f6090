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
  /**
   * The place of the project's next piece of work in the slow lane: how many this process sent
   * there for it since it was remembered (0 for the first). Queued with minus this as its
   * priority, each slow project's first piece goes before any project's second.
   */
  nextTurn: (projectId: string) => number;
};

/** How long a project stays in the slow lane after it last outran the shared one. */
export const SLOW_PROJECT_MEMORY_MS = 10 * 60_000;

/** `most`: projects remembered at most; past it, the oldest is forgotten (it then spends the shared lane's bound once more). */
export function slowProjects(most = 10_000, now: () => number = Date.now): SlowProjects {
  const remembered = new Map<string, { until: number; sent: number }>(); // in the order they were last remembered
  const forgetExpired = () => {
    const t = now();
    for (const [projectId, r] of remembered) {
      if (r.until > t) return;
      remembered.delete(projectId);
    }
  };
  return {
    isSlow: (projectId) => {
      forgetExpired();
      return remembered.has(projectId);
    },
    remember: (projectId) => {
      const sent = remembered.get(projectId)?.sent ?? 0;
      remembered.delete(projectId);
      if (remembered.size >= most) remembered.delete(remembered.keys().next().value!);
      remembered.set(projectId, { until: now() + SLOW_PROJECT_MEMORY_MS, sent });
    },
    list: () => {
      forgetExpired();
      return [...remembered.keys()];
    },
    nextTurn: (projectId) => {
      const r = remembered.get(projectId);
      if (!r) return 0;
      return r.sent++;
    },
  };
}
