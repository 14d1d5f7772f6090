import { bulkQueue } from '../modules/contacts/bulk/jobs.ts';
import { campaignQueues } from '../modules/campaigns/jobs.ts';
import { importQueue } from '../modules/contacts/import/jobs.ts';
import { domainQueues } from '../modules/domains/jobs.ts';
import { deliveryQueue } from '../modules/emails/delivery/index.ts';
import { deliveryWatchdogQueue } from '../modules/emails/delivery/recovery.ts';
import { idempotencyCleanupQueue } from '../http/idempotency.ts';
import { projectPurgeQueue } from '../modules/projects/purge.ts';
import { reputationQueue } from '../modules/reputation/guard.ts';
import { storageMaintenanceQueue } from '../modules/retention/jobs.ts';
import { segmentQueues } from '../modules/segments/jobs.ts';
import { notificationCleanupQueue } from '../modules/webhooks/service.ts';
import { systemMailQueue } from '../mail/system-mail.ts';
import { passwordResetQueue } from '../modules/auth/account-mail.ts';
import type { AnyQueueDef } from './boss.ts';

/** Every background queue of every module. Workers register all of them. */
export const queues: AnyQueueDef[] = [
  ...domainQueues,
  deliveryQueue,
  deliveryWatchdogQueue,
  systemMailQueue,
  passwordResetQueue,
  idempotencyCleanupQueue,
  importQueue,
  bulkQueue,
  reputationQueue,
  notificationCleanupQueue,
  storageMaintenanceQueue,
  projectPurgeQueue,
  ...campaignQueues,
  ...segmentQueues,
];
