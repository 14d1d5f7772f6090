/** Shapes of the API resources the dashboard reads (see shared/spec/api-spec.md). */

export type Role = 'OWNER' | 'ADMIN' | 'MEMBER';
export type User = { id: string; email: string; name?: string | null; emailVerified?: boolean };
export type Project = {
  id: string;
  name: string;
  publicKey?: string;
  secretKey?: string;
  disabled: boolean;
  tracking: 'ENABLED' | 'DISABLED' | 'MARKETING_ONLY';
  language: string;
  postalAddress?: string | null;
  role: Role;
  createdAt: string;
};

export type CursorPage<T> = { data: T[]; cursor?: string | null; hasMore: boolean; total?: number };
export type NumberedPage<T> = { data: T[]; page: number; pageSize: number; total: number; totalPages: number };

export type Contact = {
  id: string;
  email: string;
  subscribed: boolean;
  snoozedUntil?: string | null;
  data: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
};

export type DnsRecord = {
  type: 'TXT' | 'CNAME' | 'MX';
  name: string;
  value: string;
  priority?: number;
  purpose: string;
  required: boolean;
  found?: boolean;
};
export type Domain = {
  id: string;
  domain: string;
  status: 'pending' | 'verified' | string;
  createdAt: string;
  verifiedAt: string | null;
  lastCheckedAt: string | null;
  records: DnsRecord[];
};

export type EmailType = 'TRANSACTIONAL' | 'MARKETING' | 'HEADLESS';
export const EMAIL_TYPES: EmailType[] = ['MARKETING', 'TRANSACTIONAL', 'HEADLESS'];

export type Template = {
  id: string;
  name: string;
  description: string | null;
  subject: string;
  body: string;
  from: string;
  fromName: string | null;
  replyTo: string | null;
  type: EmailType;
  createdAt: string;
  updatedAt: string;
};
export type Preview = { subject: string; html: string; text: string };

export type CampaignStatus = 'DRAFT' | 'SCHEDULED' | 'SENDING' | 'SENT' | 'CANCELLED';
export const CAMPAIGN_STATUSES: CampaignStatus[] = ['DRAFT', 'SCHEDULED', 'SENDING', 'SENT', 'CANCELLED'];
export type Campaign = {
  id: string;
  name: string;
  description: string | null;
  subject: string;
  body: string;
  from: string;
  fromName: string | null;
  replyTo: string | null;
  type: EmailType;
  status: CampaignStatus;
  audienceType: 'ALL' | 'SEGMENT' | 'FILTERED';
  segmentId: string | null;
  audienceCondition?: unknown;
  scheduledFor: string | null;
  totalRecipients: number;
  sentCount: number;
  deliveredCount: number;
  openedCount: number;
  clickedCount: number;
  bouncedCount: number;
  sentAt: string | null;
  createdAt: string;
  updatedAt: string;
};
export type CampaignStats = {
  totalRecipients: number;
  sentCount: number;
  deliveredCount: number;
  openedCount: number;
  clickedCount: number;
  bouncedCount: number;
  complainedCount: number;
  unsubscribedCount: number;
  openRate: number;
  clickRate: number;
  bounceRate: number;
  deliveryRate: number;
};

export type Segment = { id: string; name: string; type: 'DYNAMIC' | 'STATIC'; memberCount: number };

export type ActivityItem = {
  id: string;
  type: string;
  occurredAt: string;
  contact: { id: string; email: string } | null;
  emailId?: string;
  subject?: string;
  eventName?: string;
  data: Record<string, unknown>;
};
