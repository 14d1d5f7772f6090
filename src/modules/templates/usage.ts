import type { Db } from '../../db/client.ts';

/** Where a template is referenced: `GET /templates/:id/usage`, and why `DELETE` is refused. */
export type TemplateUsage = {
  campaigns: { id: string; name: string }[];
  workflows: { id: string; name: string; stepId: string }[];
};

/**
 * Modules that reference templates (campaigns, workflow SEND_EMAIL steps) register a provider here
 * at import time. Each returns its references to the template; a template with any reference cannot
 * be deleted (409).
 */
export type TemplateUsageProvider = (db: Db, projectId: string, templateId: string) => Promise<Partial<TemplateUsage>>;

export const templateUsageProviders: TemplateUsageProvider[] = [];

export async function collectTemplateUsage(db: Db, projectId: string, templateId: string): Promise<TemplateUsage> {
  const usage: TemplateUsage = { campaigns: [], workflows: [] };
  for (const provider of templateUsageProviders) {
    const found = await provider(db, projectId, templateId);
    usage.campaigns.push(...(found.campaigns ?? []));
    usage.workflows.push(...(found.workflows ?? []));
  }
  return usage;
}

export const isUsed = (u: TemplateUsage) => u.campaigns.length > 0 || u.workflows.length > 0;
