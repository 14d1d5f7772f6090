/**
 * A worker-only Herald process (PROCESS_ROLE=worker, no HTTP routes loaded) that records one
 * tracked event through trackEvent and then keeps running its queues until SIGTERM.
 * Env: the usual config plus TRACK_PROJECT_ID, TRACK_EMAIL, TRACK_EVENT.
 */
import { loadConfig } from '../../src/config.ts';
import { parseTrackBody } from '../../src/modules/events/schemas.ts';
import { trackEvent } from '../../src/modules/events/service.ts';
import { startRuntime } from '../../src/runtime.ts';

const runtime = await startRuntime(loadConfig());
const input = parseTrackBody({ email: process.env.TRACK_EMAIL, event: process.env.TRACK_EVENT });
const tracked = await trackEvent(runtime.ctx, process.env.TRACK_PROJECT_ID ?? '', input);
process.stdout.write(`${JSON.stringify({ tracked: tracked.event.id })}\n`);
process.on('SIGTERM', () => void runtime.stop().then(() => process.exit(0)));
