import type { AnyQueueDef } from './boss.ts';

/** Every background queue of every module. Workers register all of them. */
export const queues: AnyQueueDef[] = [];
