import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { projectOf, requireProject } from '../../http/auth.ts';
import { describer } from '../../http/openapi.ts';
import { parse } from '../../http/validate.ts';
import { campaignRow } from '../campaigns/service.ts';
import { projectTimezone } from '../projects/settings.ts';
import { HEAVY_EVENT_COUNT, countingEvents } from '../events/day-counts.ts';
import { spanOf } from '../events/range.ts';
import { analyticsRange } from './range.ts';
import {
  campaignBreakdownSchema,
  campaignStatsQuery,
  seriesSchema,
  timeseriesQuery,
  topCampaignsQuery,
  topCampaignsSchema,
  topEventsQuery,
  topEventsSchema,
} from './schemas.ts';
import { campaignBreakdown, timeseries, topCampaigns, topEvents } from './service.ts';

export function analyticsRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireProject(ctx);
  const doc = describer('Analytics', 'project');
  const db = ctx.database.db;

  app.get(
    '/analytics/timeseries',
    {
      schema: doc({ operationId: 'analytics.timeseries', summary: 'Email metrics per interval', query: timeseriesQuery, responses: { 200: seriesSchema } }),
      onRequest,
    },
    async (req) => {
      const q = parse(timeseriesQuery, req.query);
      const { projectId } = projectOf(req);
      const range = analyticsRange(q, ctx.clock.now(), q.interval);
      return timeseries(db, projectId, { range, interval: q.interval, metric: q.metric, timezone: await projectTimezone(ctx, projectId) });
    },
  );

  app.get(
    '/analytics/top-campaigns',
    {
      schema: doc({
        operationId: 'analytics.topCampaigns',
        summary: 'Campaigns ranked by a metric',
        query: topCampaignsQuery,
        responses: { 200: topCampaignsSchema },
      }),
      onRequest,
    },
    async (req) => {
      const q = parse(topCampaignsQuery, req.query);
      return topCampaigns(db, projectOf(req).projectId, { range: analyticsRange(q, ctx.clock.now()), metric: q.metric, limit: q.limit });
    },
  );

  app.get(
    '/analytics/campaign-stats',
    {
      schema: doc({
        operationId: 'analytics.campaign',
        summary: "One campaign's stats, series and links",
        query: campaignStatsQuery,
        responses: { 200: campaignBreakdownSchema },
        errors: [404],
      }),
      onRequest,
    },
    async (req) => {
      const q = parse(campaignStatsQuery, req.query);
      const { projectId } = projectOf(req);
      const range = analyticsRange(q, ctx.clock.now(), q.interval);
      const campaign = await campaignRow(db, projectId, q.campaignId);
      return campaignBreakdown(db, campaign, { range, interval: q.interval, timezone: await projectTimezone(ctx, projectId) });
    },
  );

  app.get(
    '/analytics/top-events',
    {
      schema: doc({
        operationId: 'analytics.topEvents',
        summary: 'Most tracked events',
        description: HEAVY_EVENT_COUNT,
        query: topEventsQuery,
        responses: { 200: topEventsSchema },
        errors: [503],
      }),
      onRequest,
    },
    async (req) => {
      const { projectId } = projectOf(req);
      const q = parse(topEventsQuery, req.query);
      const range = analyticsRange(q, ctx.clock.now());
      return countingEvents(ctx, projectId, spanOf(range), (db) => topEvents(db, projectId, { range, limit: q.limit }));
    },
  );
}
