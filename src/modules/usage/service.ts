import type { Db } from '../../db/client.ts';
import type { UpcomingItem } from '../activity/upcoming.ts';
import { activeCampaignUsingDomain, activeCampaignsUsingSegment, campaignsUsingField, upcomingCampaigns } from '../campaigns/usage.ts';
import { segmentsReferencing, segmentsUsingField } from '../segments/usage.ts';
import { templateUsingDomain } from '../templates/usage.ts';
import { upcomingWorkflowSteps, workflowsUsingEvent, workflowsUsingField, workflowsUsingTemplate } from '../workflows/usage.ts';

/**
 * "In use by" and "usage" answers, in one place: each function asks every module that can hold the
 * thing (segments, campaigns, templates, workflows) and nothing registers
 * anywhere. Deleting a domain, segment, field, event name or template is refused while any answer
 * here is non-empty.
 *
 * Exported as one object so a test can stand in for a source that does not exist yet
 * (`mock.method(usage, 'templateUsers', …)`).
 */

export type UsageRef = { id: string; name: string };
export type FieldUsers = { segments: UsageRef[]; campaigns: UsageRef[]; workflows: UsageRef[] };
export type EventNameUsers = { segments: UsageRef[]; campaigns: UsageRef[]; workflows: UsageRef[] };
export type TemplateUsers = { campaigns: UsageRef[]; workflows: (UsageRef & { stepId: string })[] };

/** Segments, unfinished campaigns and workflows whose conditions reference `field` (`data.<path>` or a standard name). */
// One question after the other: `db` may be a transaction, whose single connection cannot run queries concurrently.
async function fieldUsers(db: Db, projectId: string, field: string): Promise<FieldUsers> {
  const segments = await segmentsUsingField(db, projectId, field, field.startsWith('data.'));
  const campaigns = await campaignsUsingField(db, projectId, field);
  const workflows = await workflowsUsingField(db, projectId, field);
  return { segments, campaigns, workflows };
}

/**
 * Segments and unfinished campaigns (DRAFT, SCHEDULED, SENDING, as for a field) that filter on the
 * event name, and workflows triggered by, waiting for or testing it.
 */
async function eventNameUsers(db: Db, projectId: string, eventName: string): Promise<EventNameUsers> {
  const segments = await segmentsUsingField(db, projectId, `event.${eventName}`, false);
  const campaigns = await campaignsUsingField(db, projectId, `event.${eventName}`);
  const workflows = await workflowsUsingEvent(db, projectId, eventName);
  return { segments, campaigns, workflows };
}

/**
 * What sends a template. Campaigns carry their own copy of the content (the spec gives them no
 * template reference), so only workflow SEND_EMAIL steps hold one.
 */
async function templateUsers(db: Db, projectId: string, templateId: string): Promise<TemplateUsers> {
  return { campaigns: [], workflows: await workflowsUsingTemplate(db, projectId, templateId) };
}

/** Why a segment cannot be deleted: segments that reference it, SCHEDULED/SENDING campaigns that go to it. */
async function segmentHolders(db: Db, projectId: string, segmentId: string): Promise<string[]> {
  const segments = await segmentsReferencing(db, projectId, segmentId);
  const campaigns = await activeCampaignsUsingSegment(db, projectId, segmentId);
  const reasons: string[] = [];
  if (segments.length > 0) reasons.push(`Segment is referenced by segment ${segments.map((u) => `'${u.name}'`).join(', ')}`);
  if (campaigns) reasons.push(campaigns);
  return reasons;
}

/** The first sender still using `domain` (or a subdomain): 'template "Welcome"', 'sending campaign "X"', or null. */
async function domainSender(db: Db, projectId: string, domain: string): Promise<string | null> {
  return (await templateUsingDomain(db, projectId, domain)) ?? (await activeCampaignUsingDomain(db, projectId, domain));
}

/** What is due next: scheduled campaigns (and waiting workflow steps), soonest `limit` first. */
async function upcoming(db: Db, projectId: string, opts: { limit: number; now: Date }): Promise<UpcomingItem[]> {
  const [campaigns, workflows] = await Promise.all([upcomingCampaigns(db, projectId, opts), upcomingWorkflowSteps(db, projectId, opts)]);
  return [...campaigns, ...workflows];
}

export const usage = { fieldUsers, eventNameUsers, templateUsers, segmentHolders, domainSender, upcoming };
