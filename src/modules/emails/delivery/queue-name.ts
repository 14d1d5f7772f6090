export const DELIVERY_QUEUE = 'email-delivery';
/** Cron sweep that re-queues emails stranded by a worker that died (delivery/recovery.ts). */
export const DELIVERY_WATCHDOG_QUEUE = 'email-delivery-watchdog';
