import { z } from 'zod';
import type { AudienceType, CampaignStatus } from '../../db/schema/campaigns.ts';
import type { EmailType } from '../../db/schema/emails.ts';
import { badRequest } from '../../http/errors.ts';
import { component } from '../../http/openapi.ts';
import { dirParam, fallbackEnum, pageParams, searchParam } from '../../http/pagination.ts';
import { messageContentFields } from '../templates/message-content.ts';

export const CAMPAIGN_STATUSES = ['DRAFT', 'SCHEDULED', 'SENDING', 'SENT', 'CANCELLED'] as const satisfies readonly CampaignStatus[];
export const CAMPAIGN_TYPES = ['TRANSACTIONAL', 'MARKETING', 'HEADLESS'] as const satisfies readonly EmailType[];
export const AUDIENCE_TYPES = ['ALL', 'SEGMENT', 'FILTERED'] as const satisfies readonly AudienceType[];

const noLineBreak = (v: string) => !/[\r\n]/.test(v);
const email = z.string().trim().toLowerCase().email().max(320);

/** An optional text field: null or blank clears it. */
const optionalText = <T extends z.ZodTypeAny>(schema: T) => z.preprocess((v) => (typeof v === 'string' && v.trim() === '' ? null : v), schema.nullable());

const upper = (v: unknown) => (typeof v === 'string' ? v.trim().toUpperCase() : v);

const fields = {
  name: z.string().trim().min(1).max(200),
  description: optionalText(z.string().trim().max(2000)),
  subject: z.string().min(1).max(998).refine(noLineBreak, { message: 'subject must be a single line' }),
  body: z.string().min(1).max(1_000_000),
  from: email,
  fromName: optionalText(z.string().trim().max(200).refine(noLineBreak, { message: 'fromName must be a single line' })),
  replyTo: optionalText(email),
  type: z.preprocess(upper, z.enum(CAMPAIGN_TYPES)),
  audienceType: z.preprocess(upper, z.enum(AUDIENCE_TYPES)),
  segmentId: z.string().uuid().nullable(),
  // The condition tree is checked by the conditions module (parseCondition/validateCondition).
  audienceCondition: z.record(z.unknown()).nullable(),
};

export const createCampaignBody = z
  .object({
    name: fields.name,
    description: fields.description.optional(),
    subject: fields.subject,
    body: fields.body,
    from: fields.from,
    fromName: fields.fromName.optional(),
    replyTo: fields.replyTo.optional(),
    type: fields.type.default('MARKETING'),
    audienceType: fields.audienceType.default('ALL'),
    segmentId: fields.segmentId.optional(),
    audienceCondition: fields.audienceCondition.optional(),
  })
  // Unknown keys are 422 (as for segments, contacts and workflows): `status` or `scheduledFor` here
  // was accepted and ignored, which reads as done.
  .strict();

/** PUT: the fields given replace the stored ones; absent fields keep their value, null clears an optional one. */
export const updateCampaignBody = z.object(fields).partial().strict();

export type CreateCampaignInput = z.output<typeof createCampaignBody>;
export type UpdateCampaignInput = z.output<typeof updateCampaignBody>;

export const CAMPAIGN_SORTS = ['name', 'createdAt', 'updatedAt'] as const;

export const listCampaignsQuery = pageParams(100).extend({
  status: z
    .string()
    .optional()
    .transform((v) => {
      const s = v?.trim().toUpperCase();
      if (!s) return undefined;
      if (!(CAMPAIGN_STATUSES as readonly string[]).includes(s)) {
        // The spec: an unrecognised status filter is a 400, not a validation error.
        throw badRequest(`Invalid status '${v}': use one of ${CAMPAIGN_STATUSES.join(', ')}`, { status: v });
      }
      return s as CampaignStatus;
    })
    .describe(`${CAMPAIGN_STATUSES.join(', ')} (any case); any other value is 400 BAD_REQUEST`),
  search: searchParam,
  sort: fallbackEnum(CAMPAIGN_SORTS, 'createdAt'),
  dir: dirParam,
});

export type ListCampaignsQuery = z.output<typeof listCampaignsQuery>;

export const campaignIdParams = z.object({ id: z.string() });

/** `scheduledFor`: anything `new Date()` parses (string or epoch milliseconds), or null/absent for now. */
export const sendCampaignBody = z.object({ scheduledFor: z.union([z.string(), z.number(), z.null()]).optional() }).passthrough();

export const testCampaignBody = z.object({ email });

export type CampaignRecord = {
  id: string;
  projectId: string;
  name: string;
  description: string | null;
  subject: string;
  body: string;
  from: string;
  fromName: string | null;
  replyTo: string | null;
  type: EmailType;
  status: CampaignStatus;
  audienceType: AudienceType;
  audienceCondition: unknown;
  segmentId: string | null;
  scheduledFor: string | null;
  totalRecipients: number;
  sentCount: number;
  deliveredCount: number;
  openedCount: number;
  clickedCount: number;
  bouncedCount: number;
  sentAt: string | null;
  completedAt: string | null;
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

// Responses (the document and the strict response check: src/http/openapi.ts)

const count = z.number().int();

export const campaignSchema = component(
  'Campaign',
  z.object({
    ...messageContentFields,
    type: z.enum(CAMPAIGN_TYPES),
    status: z.enum(CAMPAIGN_STATUSES),
    audienceType: z.enum(AUDIENCE_TYPES),
    audienceCondition: z.unknown().describe('A condition tree, for FILTERED audiences'),
    segmentId: z.string().nullable(),
    scheduledFor: z.string().nullable(),
    totalRecipients: count,
    sentCount: count,
    deliveredCount: count,
    openedCount: count,
    clickedCount: count,
    bouncedCount: count,
    sentAt: z.string().nullable(),
    completedAt: z.string().nullable(),
    createdAt: z.string(),
    updatedAt: z.string(),
  }),
);

export const campaignSendResultSchema = z.object({
  success: z.literal(true),
  data: z.object({ id: z.string(), name: z.string(), status: z.enum(CAMPAIGN_STATUSES), scheduledFor: z.string().nullable() }),
  message: z.string(),
});

export const campaignStatsSchema = z.object({
  totalRecipients: count,
  sentCount: count,
  deliveredCount: count,
  openedCount: count,
  clickedCount: count,
  bouncedCount: count,
  complainedCount: count,
  unsubscribedCount: count,
  openRate: z.number(),
  clickRate: z.number(),
  bounceRate: z.number(),
  deliveryRate: z.number(),
});

export const testSendResultSchema = z.object({ id: z.string(), to: z.string(), subject: z.string(), status: z.string() });
