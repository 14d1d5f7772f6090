import { z } from 'zod';
import type { QueueDef } from '../../jobs/boss.ts';
import { clearExpiredEmailContents } from '../emails/retention.ts';
import { maintainEventPartitions } from '../events/partitions.ts';
import { foldExitedWriters } from '../../db/counter-rows.ts';

/**
 * Keeps the growing tables in shape, hourly: the events partitions of the months ahead exist,
 * what EVENT_RETENTION_DAYS and EMAIL_CONTENT_RETENTION_DAYS expire is removed, and the counter
 * rows of database backends that have exited are folded together (db/counter-rows.ts).
 */
const empty = z.object({}).passthrough();

export const storageMaintenanceQueue: QueueDef<z.infer<typeof empty>> = {
  name: 'storage-maintenance',
  schema: empty,
  cron: '23 * * * *',
  retryLimit: 1,
  expireInSeconds: 1800,
  handler: async (ctx) => {
    const events = await maintainEventPartitions(ctx);
    const contents = await clearExpiredEmailContents(ctx);
    const counterRowsFolded = await foldExitedWriters(ctx.database);
    if (events.created.length || events.dropped.length || events.deleted || contents || counterRowsFolded) {
      ctx.log.info({ ...events, emailContentsCleared: contents, counterRowsFolded }, 'storage maintenance');
    }
  },
};
