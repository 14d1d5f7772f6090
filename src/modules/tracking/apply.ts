import { eq } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import type { EmailType } from '../../db/schema/emails.ts';
import { projects } from '../../db/schema/users.ts';
import type { TrackingOptions } from '../../mail/tracking.ts';

export type TrackingMode = 'ENABLED' | 'DISABLED' | 'MARKETING_ONLY';

export async function projectTrackingMode(ctx: AppContext, projectId: string): Promise<TrackingMode> {
  // Workers compose many messages per project: the setting is cached on the context for a few seconds.
  const hit = ctx.caches.trackingModes.get(projectId, 'mode');
  if (hit) return hit;
  const [row] = await ctx.database.db.select({ tracking: projects.tracking }).from(projects).where(eq(projects.id, projectId));
  const mode = (row?.tracking ?? 'DISABLED') as TrackingMode;
  ctx.caches.trackingModes.set(projectId, 'mode', mode);
  return mode;
}

/** Whether mail of `type` is tracked under `mode` (decisions.md § 5: MARKETING_ONLY leaves transactional mail untouched). */
export const isTracked = (mode: TrackingMode, type: EmailType) => mode === 'ENABLED' || (mode === 'MARKETING_ONLY' && type !== 'TRANSACTIONAL');

/** The delivery worker's one call: how to track links and opens of this email, or null when the project does not track this type of mail. */
export async function trackingOptions(ctx: AppContext, email: { id: string; projectId: string; type: EmailType }): Promise<TrackingOptions | null> {
  const mode = await projectTrackingMode(ctx, email.projectId);
  if (!isTracked(mode, email.type)) return null;
  return {
    emailId: email.id,
    publicUrl: ctx.config.publicUrl,
    secret: ctx.config.jwtSecret,
    opens: true,
    clicks: true,
  };
}
