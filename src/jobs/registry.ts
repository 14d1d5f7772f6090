import { domainQueues } from '../modules/domains/jobs.ts';
import { deliveryQueue } from '../modules/emails/delivery/index.ts';
import { idempotencyCleanupQueue } from '../http/idempotency.ts';
import type { AnyQueueDef } from './boss.ts';

/** Every background queue of every module. Workers register all of them. */
export const queues: AnyQueueDef[] = [...domainQueues, deliveryQueue, idempotencyCleanupQueue];
