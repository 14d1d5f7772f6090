/**
 * The API's resource shapes are the SDK's generated types (sdk/src/operations.ts); this module
 * re-exports the ones pages name and adds the dashboard's lists of their enum values.
 */
import type { Campaign, Email, Operations, Template } from '@herald/client';

export type { Campaign, Domain, Email, Project, Segment, Template } from '@herald/client';

/** What an operation answers, e.g. `Answer<'workflows.get'>`. */
export type Answer<K extends keyof Operations> = Operations[K]['response'];

export type EmailType = Template['type'];
export const EMAIL_TYPES: EmailType[] = ['MARKETING', 'TRANSACTIONAL', 'HEADLESS'];
/** The email type a URL parameter names, if it names one. */
export const emailTypeOf = (s: string | null): EmailType | null => EMAIL_TYPES.find((t) => t === s) ?? null;

export type CampaignStatus = Campaign['status'];
export const CAMPAIGN_STATUSES: CampaignStatus[] = ['DRAFT', 'SCHEDULED', 'SENDING', 'SENT', 'CANCELLED'];

export type EmailStatus = Email['status'];
export const EMAIL_STATUSES: EmailStatus[] = ['QUEUED', 'SENDING', 'SENT', 'DELIVERED', 'BOUNCED', 'COMPLAINED', 'FAILED', 'SKIPPED', 'SUPPRESSED'];
/** An email status's badge colour: red for what went wrong, grey for what did not go. */
export const EMAIL_STATUS_COLORS: Record<EmailStatus, string> = {
  QUEUED: 'gray',
  SENDING: 'yellow',
  SENT: 'blue',
  DELIVERED: 'teal',
  BOUNCED: 'red',
  COMPLAINED: 'red',
  FAILED: 'red',
  SKIPPED: 'gray',
  SUPPRESSED: 'gray',
};
