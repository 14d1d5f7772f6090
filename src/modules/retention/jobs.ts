import { z } from 'zod';
import type { QueueDef } from '../../jobs/boss.ts';
import { clearExpiredEmailContents } from '../emails/retention.ts';
import { maintainEventPartitions } from '../events/partitions.ts';
import { foldExitedWriters } from '../../db/counter-rows.ts';
import { sweepDeletedContacts } from '../contacts/deleted.ts';

/**
 * Keeps the growing tables in shape, hourly: the events partitions of the months ahead exist,
 * what EVENT_RETENTION_DAYS and EMAIL_CONTENT_RETENTION_DAYS expire is removed, the counter
 * rows of database backends that have exited are folded together (db/counter-rows.ts), and the
 * rows written for contacts just as they were deleted are brought in line (contacts/deleted.ts).
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
    const deletedContacts = await sweepDeletedContacts(ctx.database, ctx.clock.now());
    if (events.created.length || events.dropped.length || events.deleted || contents || counterRowsFolded || deletedContacts.events || deletedContacts.emails) {
      ctx.log.info({ ...events, emailContentsCleared: contents, counterRowsFolded, deletedContacts }, 'storage maintenance');
    }
  },
};
