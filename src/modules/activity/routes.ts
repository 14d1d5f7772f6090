import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { projectOf, requireProject } from '../../http/auth.ts';
import { cursorList, describer } from '../../http/openapi.ts';
import { parse } from '../../http/validate.ts';
import { rangeQuery, toTimeRange } from '../events/range.ts';
import {
  activityItemSchema,
  activityQuery,
  activityStatsSchema,
  activityTypesSchema,
  recentCountQuery,
  recentCountSchema,
  upcomingQuery,
  upcomingSchema,
} from './schemas.ts';
import { activityFeed, activityStats, activityTypes, recentCount } from './service.ts';
import { listUpcoming } from './upcoming.ts';

export function activityRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireProject(ctx);
  const doc = describer('Activity', 'project');
  const db = ctx.database.db;

  app.get(
    '/activity',
    {
      schema: doc({
        operationId: 'activity.list',
        summary: 'The activity feed (emails and events), newest first',
        query: activityQuery,
        responses: { 200: cursorList(activityItemSchema) },
        errors: [400],
      }),
      onRequest,
    },
    async (req) => activityFeed(db, projectOf(req).projectId, parse(activityQuery, req.query)),
  );

  app.get(
    '/activity/stats',
    {
      schema: doc({
        operationId: 'activity.stats',
        summary: 'Activity counts per type over a time range',
        query: rangeQuery,
        responses: { 200: activityStatsSchema },
      }),
      onRequest,
    },
    async (req) => activityStats(db, projectOf(req).projectId, toTimeRange(parse(rangeQuery, req.query), ctx.clock.now())),
  );

  app.get(
    '/activity/recent-count',
    {
      schema: doc({
        operationId: 'activity.recentCount',
        summary: 'Activity in the last minutes',
        query: recentCountQuery,
        responses: { 200: recentCountSchema },
      }),
      onRequest,
    },
    async (req) => recentCount(db, projectOf(req).projectId, parse(recentCountQuery, req.query).minutes, ctx.clock.now()),
  );

  app.get(
    '/activity/types',
    { schema: doc({ operationId: 'activity.types', summary: 'Activity types seen in the project', responses: { 200: activityTypesSchema } }), onRequest },
    async (req) => activityTypes(db, projectOf(req).projectId),
  );

  app.get(
    '/activity/upcoming',
    {
      schema: doc({
        operationId: 'activity.upcoming',
        summary: 'Scheduled campaigns and waiting workflow steps',
        query: upcomingQuery,
        responses: { 200: upcomingSchema },
      }),
      onRequest,
    },
    async (req) => listUpcoming(db, projectOf(req).projectId, { limit: parse(upcomingQuery, req.query).limit, now: ctx.clock.now() }),
  );
}
