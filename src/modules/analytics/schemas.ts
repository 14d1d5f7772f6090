import { z } from 'zod';
import { campaignStatsSchema } from '../campaigns/schemas.ts';
import { rangeQuery } from '../events/range.ts';

export const METRICS = ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained', 'unsubscribed'] as const;
export type Metric = (typeof METRICS)[number];

export const timeseriesQuery = rangeQuery.extend({
  interval: z.enum(['hour', 'day', 'week']).default('day'),
  /** One metric only; all of them when absent. */
  metric: z.enum(METRICS).optional(),
});

export const TOP_CAMPAIGN_METRICS = ['opens', 'clicks', 'sent', 'openRate', 'clickRate'] as const;

const limit = z.coerce.number().int().min(1).max(100).default(10);

export const topCampaignsQuery = rangeQuery.extend({ metric: z.enum(TOP_CAMPAIGN_METRICS).default('opens'), limit });

export const campaignStatsQuery = rangeQuery.extend({
  campaignId: z.string().max(100),
  interval: z.enum(['hour', 'day', 'week']).default('day'),
});

export const topEventsQuery = rangeQuery.extend({ limit });

export type Point = { t: string } & Partial<Record<Metric, number>>;

// Responses (the document and the strict response check: src/http/openapi.ts)

const metricCounts = z.object(Object.fromEntries(METRICS.map((m) => [m, z.number().optional()])) as Record<Metric, z.ZodOptional<z.ZodNumber>>);

export const seriesSchema = z.object({
  interval: z.string(),
  timezone: z.string(),
  from: z.string(),
  to: z.string(),
  totals: metricCounts,
  points: z.array(metricCounts.extend({ t: z.string() })),
});

export const topCampaignsSchema = z.object({
  from: z.string(),
  to: z.string(),
  metric: z.string(),
  data: z.array(
    z.object({
      id: z.string(),
      name: z.string(),
      status: z.string(),
      sentAt: z.string().nullable(),
      sent: z.number().int(),
      delivered: z.number().int(),
      opens: z.number().int(),
      clicks: z.number().int(),
      bounced: z.number().int(),
      complained: z.number().int(),
      openRate: z.number(),
      clickRate: z.number(),
    }),
  ),
});

export const campaignBreakdownSchema = z.object({
  campaign: z.object({ id: z.string(), name: z.string() }),
  stats: campaignStatsSchema,
  series: seriesSchema,
  links: z.array(z.object({ url: z.string(), clicks: z.number().int(), uniqueClicks: z.number().int() })),
});

export const topEventsSchema = z.object({
  from: z.string(),
  to: z.string(),
  data: z.array(z.object({ name: z.string(), count: z.number().int(), uniqueContacts: z.number().int() })),
});
