import type { AppContext } from '../../../context.ts';
import type { EmailRow as ClaimedEmail } from '../lifecycle.ts';

export type Outcome = 'sent' | 'delivered' | 'bounced' | 'failed' | 'suppressed' | 'skipped' | 'retrying';

/** One log line per email outcome: id, project and the relay's reply; never the recipient. */
export function logOutcome(ctx: AppContext, email: ClaimedEmail, outcome: Outcome, reply: string): void {
  const level = outcome === 'bounced' || outcome === 'failed' ? 'warn' : 'info';
  ctx.log[level]({ emailId: email.id, projectId: email.projectId, outcome, reply }, `email ${email.id} ${outcome} (project ${email.projectId}): ${reply}`);
}
