import type { AppContext } from '../../context.ts';
import type { EmailType } from '../../db/schema/emails.ts';
import type { TrackingOptions } from '../../mail/tracking.ts';

export type TrackingMode = 'ENABLED' | 'DISABLED' | 'MARKETING_ONLY';

/** Whether mail of `type` is tracked under `mode` (decisions.md § 5: MARKETING_ONLY leaves transactional mail untouched). */
export const isTracked = (mode: TrackingMode, type: EmailType) => mode === 'ENABLED' || (mode === 'MARKETING_ONLY' && type !== 'TRANSACTIONAL');

/** The delivery worker's one call: how to track links and opens of this email (under the project's `mode`), or null when the project does not track this type of mail. */
export function trackingOptions(ctx: AppContext, email: { id: string; type: EmailType }, mode: TrackingMode): TrackingOptions | null {
  if (!isTracked(mode, email.type)) return null;
  return {
    emailId: email.id,
    publicUrl: ctx.config.publicUrl,
    secret: ctx.config.jwtSecret,
    opens: true,
    clicks: true,
  };
}
