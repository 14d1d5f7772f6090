/** The campaign engine's queue: one live job per sending campaign (schedule → fan out → finalise). */
export const CAMPAIGN_QUEUE = 'campaign-send';
/** Cron sweep that restarts campaigns whose engine job was lost. */
export const CAMPAIGN_WATCHDOG_QUEUE = 'campaign-watchdog';
