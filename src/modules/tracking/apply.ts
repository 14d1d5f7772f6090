import { eq } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import type { EmailType } from '../../db/schema/emails.ts';
import { projects } from '../../db/schema/users.ts';
import { applyTracking } from '../../mail/tracking.ts';

export type TrackingMode = 'ENABLED' | 'DISABLED' | 'MARKETING_ONLY';

/** Workers compose many messages per project: its tracking setting is read at most every few seconds. */
const TTL_MS = 5_000;
const MAX_ENTRIES = 10_000;
const modes = new Map<string, { mode: TrackingMode; at: number }>();

export async function projectTrackingMode(ctx: AppContext, projectId: string): Promise<TrackingMode> {
  const hit = modes.get(projectId);
  if (hit && Date.now() - hit.at < TTL_MS) return hit.mode;
  const [row] = await ctx.database.db.select({ tracking: projects.tracking }).from(projects).where(eq(projects.id, projectId));
  const mode = (row?.tracking ?? 'DISABLED') as TrackingMode;
  if (modes.size >= MAX_ENTRIES) modes.delete(modes.keys().next().value!);
  modes.set(projectId, { mode, at: Date.now() });
  return mode;
}

/** Whether mail of `type` is tracked under `mode` (decisions.md § 5: MARKETING_ONLY leaves transactional mail untouched). */
export const isTracked = (mode: TrackingMode, type: EmailType) =>
  mode === 'ENABLED' || (mode === 'MARKETING_ONLY' && type !== 'TRANSACTIONAL');

/** The delivery worker's one call: the HTML with tracked links and the open pixel, when the project tracks this type of mail. */
export async function trackHtml(
  ctx: AppContext,
  email: { id: string; projectId: string; type: EmailType },
  html: string,
): Promise<string> {
  const mode = await projectTrackingMode(ctx, email.projectId);
  if (!isTracked(mode, email.type)) return html;
  return applyTracking(html, {
    emailId: email.id,
    publicUrl: ctx.config.publicUrl,
    secret: ctx.config.jwtSecret,
    opens: true,
    clicks: true,
  });
}
