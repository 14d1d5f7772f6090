import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AppContext } from '../../context.ts';
import { projectOf, requireApiKey, requireProject } from '../../http/auth.ts';
import { idempotency } from '../../http/idempotency.ts';
import { parse } from '../../http/validate.ts';
import { trackCors, trackPreflight } from './cors.ts';
import { distinctEventNames, eventStats, listContactEvents, listEvents } from './list.ts';
import { rangeQuery, toTimeRange } from './range.ts';
import { contactEventsQuery, contactIdParams, eventNameParams, listEventsQuery, parseTrackBody } from './schemas.ts';
import { trackEvent } from './service.ts';
import { deleteEventName, eventUsage } from './usage.ts';

export function eventRoutes(app: FastifyInstance, ctx: AppContext): void {
  const idem = idempotency(ctx);
  const db = ctx.database.db;

  const track = async (req: FastifyRequest) => {
    const result = await trackEvent(ctx, projectOf(req).projectId, parseTrackBody(req.body));
    return {
      success: true,
      data: { contact: result.contact.id, event: result.event.id, timestamp: result.event.createdAt.toISOString() },
    };
  };

  // Public key only (api-spec Authentication § 4): a secret key here is 401.
  app.options('/v1/track', trackPreflight);
  app.post(
    '/v1/track',
    { onRequest: [trackCors, requireApiKey(ctx, 'public')], preHandler: idem.preHandler, onSend: idem.onSend },
    track,
  );

  const onRequest = requireProject(ctx);

  // The dashboard's alias: same body, same response.
  app.post('/events/track', { onRequest, preHandler: idem.preHandler, onSend: idem.onSend }, track);

  app.get('/events', { onRequest }, async (req) => listEvents(db, projectOf(req).projectId, parse(listEventsQuery, req.query)));

  app.get('/events/stats', { onRequest }, async (req) =>
    eventStats(db, projectOf(req).projectId, toTimeRange(parse(rangeQuery, req.query), ctx.clock.now())),
  );

  app.get('/events/names', { onRequest }, async (req) => ({ names: await distinctEventNames(db, projectOf(req).projectId) }));

  app.get('/events/contact/:contactId', { onRequest }, async (req) => {
    const { contactId } = parse(contactIdParams, req.params);
    // The static `contact` segment shadows `/events/:eventName/usage` for an event named "contact";
    // no contact id is "usage", so that path can only mean the event's usage.
    if (contactId === 'usage') return eventUsage(db, projectOf(req).projectId, 'contact');
    return listContactEvents(db, projectOf(req).projectId, contactId, parse(contactEventsQuery, req.query));
  });

  app.get('/events/:eventName/usage', { onRequest }, async (req) =>
    eventUsage(db, projectOf(req).projectId, parse(eventNameParams, req.params).eventName),
  );

  app.delete('/events/:eventName', { onRequest }, async (req, reply) => {
    await deleteEventName(ctx, projectOf(req).projectId, parse(eventNameParams, req.params).eventName);
    return reply.status(204).send();
  });
}
