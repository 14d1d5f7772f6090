import { sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import type { Tx } from '../../db/client.ts';
import { escapeHtml } from '../../mail/locales.ts';
import { SYSTEM_MAIL_QUEUE } from '../../mail/system-mail.ts';
import type { Category, Period } from './usage.ts';

const LEVELS = [80, 100] as const;

/**
 * The owners get one email when a category reaches 80 % and one at 100 % of its cap, at most once
 * per category, month and level (billing_warnings' primary key decides, in the same transaction).
 */
export async function queueLimitWarnings(
  ctx: AppContext,
  t: Tx,
  w: { projectId: string; category: Category; limit: number; usage: number; period: Period },
): Promise<void> {
  for (const level of LEVELS) {
    if (w.usage * 100 < level * w.limit) continue;
    const { rows } = await t.tx.execute<{ name: string; emails: string[] }>(sql`
      WITH inserted AS (
        INSERT INTO billing_warnings (project_id, category, period, level) VALUES (${w.projectId}, ${w.category}, ${w.period.key}, ${level})
        ON CONFLICT DO NOTHING RETURNING project_id
      )
      SELECT p.name, array(SELECT u.email FROM memberships m JOIN users u ON u.id = m.user_id
                             WHERE m.project_id = p.id AND m.role = 'OWNER' ORDER BY u.email) AS emails
        FROM inserted i JOIN projects p ON p.id = i.project_id`);
    const row = rows[0];
    if (!row) continue;
    const subject = level === 100 ? `${row.name}: monthly ${w.category} limit reached` : `${row.name}: ${level}% of the monthly ${w.category} limit used`;
    const html =
      `<p>The project <strong>${escapeHtml(row.name)}</strong> has used ${w.usage} of its ${w.limit} ${escapeHtml(w.category)} emails for ${w.period.key}.</p>` +
      (level === 100
        ? '<p>Further sends in this category are refused until the limit is raised or the month ends.</p>'
        : '<p>Sends beyond the limit will be refused. You can raise it in the billing settings.</p>');
    for (const to of row.emails) await ctx.jobs.send(SYSTEM_MAIL_QUEUE, { to, subject, html }, { client: t.client });
  }
}
