import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { projectOf, requireProject } from '../../http/auth.ts';
import { parse } from '../../http/validate.ts';
import { rangeQuery, toTimeRange } from '../events/range.ts';
import { activityQuery, recentCountQuery, upcomingQuery } from './schemas.ts';
import { activityFeed, activityStats, activityTypes, recentCount } from './service.ts';
import { listUpcoming } from './upcoming.ts';

export function activityRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireProject(ctx);
  const db = ctx.database.db;

  app.get('/activity', { onRequest }, async (req) => activityFeed(db, projectOf(req).projectId, parse(activityQuery, req.query)));

  app.get('/activity/stats', { onRequest }, async (req) =>
    activityStats(db, projectOf(req).projectId, toTimeRange(parse(rangeQuery, req.query), ctx.clock.now())),
  );

  app.get('/activity/recent-count', { onRequest }, async (req) =>
    recentCount(db, projectOf(req).projectId, parse(recentCountQuery, req.query).minutes, ctx.clock.now()),
  );

  app.get('/activity/types', { onRequest }, async (req) => activityTypes(db, projectOf(req).projectId));

  app.get('/activity/upcoming', { onRequest }, async (req) =>
    listUpcoming(db, projectOf(req).projectId, { limit: parse(upcomingQuery, req.query).limit, now: ctx.clock.now() }),
  );
}
