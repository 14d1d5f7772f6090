import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { projectOf, requireProject } from '../../http/auth.ts';
import { cursorList, describer } from '../../http/openapi.ts';
import { parse } from '../../http/validate.ts';
import { HEAVY_EVENT_COUNT, countingEvents } from '../events/day-counts.ts';
import { HEAVY_CONTACT_EVENTS, readingContactEvents } from '../events/list.ts';
import { rangeQuery, spanOf, spanOfBounds, toTimeRange } from '../events/range.ts';
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
import { activityFeed, activityStats, activityTypes, recentCount, recentSpan } from './service.ts';
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
        description: `A first page over a range counts its activity for \`total\`. ${HEAVY_EVENT_COUNT} With \`contactId\`: ${HEAVY_CONTACT_EVENTS}`,
        query: activityQuery,
        responses: { 200: cursorList(activityItemSchema) },
        errors: [400, 503],
      }),
      onRequest,
    },
    async (req) => {
      const { projectId } = projectOf(req);
      const q = parse(activityQuery, req.query);
      if (q.contactId !== undefined) return readingContactEvents(ctx, projectId, q.contactId, (db) => activityFeed(db, projectId, q));
      // A range's first page counts its partial days' events for `total`.
      const span = spanOfBounds(q);
      const counts = q.cursor === undefined && (span.from !== undefined || span.end !== undefined);
      return counts ? countingEvents(ctx, projectId, span, (db) => activityFeed(db, projectId, q)) : activityFeed(db, projectId, q);
    },
  );

  app.get(
    '/activity/stats',
    {
      schema: doc({
        operationId: 'activity.stats',
        summary: 'Activity counts per type over a time range',
        description: HEAVY_EVENT_COUNT,
        query: rangeQuery,
        responses: { 200: activityStatsSchema },
        errors: [503],
      }),
      onRequest,
    },
    async (req) => {
      const { projectId } = projectOf(req);
      const range = toTimeRange(parse(rangeQuery, req.query), ctx.clock.now());
      return countingEvents(ctx, projectId, spanOf(range), (db) => activityStats(db, projectId, range));
    },
  );

  app.get(
    '/activity/recent-count',
    {
      schema: doc({
        operationId: 'activity.recentCount',
        summary: 'Activity in the last minutes',
        description: HEAVY_EVENT_COUNT,
        query: recentCountQuery,
        responses: { 200: recentCountSchema },
        errors: [503],
      }),
      onRequest,
    },
    async (req) => {
      const { projectId } = projectOf(req);
      const { minutes } = parse(recentCountQuery, req.query);
      const now = ctx.clock.now();
      return countingEvents(ctx, projectId, recentSpan(minutes, now), (db) => recentCount(db, projectId, minutes, now));
    },
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
