import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { projectOf, requireApiKey, requireProject } from '../../http/auth.ts';
import { asHeavyRead } from '../../http/heavy-reads.ts';
import { idempotency } from '../../http/idempotency.ts';
import { cursorList, describe } from '../../http/openapi.ts';
import { parse } from '../../http/validate.ts';
import { trackCors, trackPreflight } from './cors.ts';
import { WRITE_GROUP_LIMITS, groupShareOfData, logGroupFailure, writeGroups } from '../../db/write-groups.ts';
import { MAX_LISTED_EVENT_NAMES, distinctEventNames, eventStats, listContactEvents, listEvents, readingContactEvents, HEAVY_CONTACT_EVENTS } from './list.ts';
import { rangeQuery, toTimeRange } from './range.ts';
import {
  contactEventsQuery,
  contactIdParams,
  eventNameParams,
  eventNamesSchema,
  eventSchema,
  eventStatsSchema,
  eventUsageSchema,
  listEventsQuery,
  parseTrackBody,
  trackBody,
  trackResultSchema,
} from './schemas.ts';
import { type PreparedTrack, type TrackResult, prepareTrack, trackContactKeys, trackMany, trackPrepared } from './service.ts';
import { EVENT_DELETES_PER_PROCESS, EVENT_DELETES_PER_PROJECT, deleteEventName, eventUsage } from './usage.ts';

export function eventRoutes(app: FastifyInstance, ctx: AppContext): void {
  const idem = idempotency(ctx);
  const db = ctx.database.db;
  const trackDoc = (operationId: string, access: 'publicKey' | 'project', summary: string) =>
    describe({
      operationId,
      summary,
      description:
        'Records an event for the contact with this email (created, subscribed, when new). `data` is stored on the contact; `subscribed: false` records without resubscribing. Event names email.*, contact.subscribed, contact.unsubscribed and segment.* are reserved.',
      tag: 'Events',
      access,
      idempotent: true,
      body: trackBody,
      bodyExample: { email: 'ada@example.com', event: 'signed-up', data: { plan: 'pro' } },
      responses: {
        200: {
          schema: trackResultSchema,
          example: {
            success: true,
            data: { contact: 'cnt_01j9z3k5e8f7g6h5j4k3m2n1p0', event: 'evt_01j9z3k5e8f7g6h5j4k3m2n1p1', timestamp: '2026-01-01T12:00:00.000Z' },
          },
        },
      },
      errors: [400, 402, 409, 413, 415],
    });
  const doc = (d: Omit<Parameters<typeof describe>[0], 'tag' | 'access'>) => describe({ tag: 'Events', access: 'project', ...d });

  // Concurrent tracks of one project commit together (db/write-groups.ts).
  const tracks = writeGroups<PreparedTrack, TrackResult>({
    ...WRITE_GROUP_LIMITS,
    conflictKeys: trackContactKeys,
    sizeOf: (track) => groupShareOfData(track.dataBytes),
    runOne: (track) => trackPrepared(ctx, track),
    runMany: (group) => trackMany(ctx, group[0].projectId, group),
    onGroupFailed: (err, size) => logGroupFailure(ctx, 'track', err, size),
  });

  const track = async (req: FastifyRequest) => {
    const auth = projectOf(req);
    const prepared = prepareTrack(ctx, auth.projectId, parseTrackBody(req.body), { publicKey: auth.keyType === 'public' });
    const result = await tracks.submit(auth.projectId, prepared);
    return {
      success: true,
      data: { contact: result.contact.id, event: result.event.id, timestamp: result.event.createdAt.toISOString() },
    };
  };

  // Public key only (api-spec Authentication § 4): a secret key here is 401.
  app.options(
    '/v1/track',
    {
      schema: describe({
        operationId: 'events.trackPreflight',
        summary: 'CORS preflight for browsers calling /v1/track',
        tag: 'Events',
        access: 'none',
        responses: { 204: null },
      }),
    },
    trackPreflight,
  );
  app.post(
    '/v1/track',
    {
      onRequest: [trackCors, requireApiKey(ctx, 'public')],
      preHandler: idem.preHandler,
      onSend: idem.onSend,
      schema: trackDoc('events.track', 'publicKey', 'Track an event (public key; callable from browsers)'),
    },
    track,
  );

  const onRequest = requireProject(ctx);

  // The dashboard's alias: same body, same response.
  app.post(
    '/events/track',
    {
      onRequest,
      preHandler: idem.preHandler,
      onSend: idem.onSend,
      schema: trackDoc('events.trackFromDashboard', 'project', 'Track an event (secret key or session; same body as /v1/track)'),
    },
    track,
  );

  app.get(
    '/events',
    {
      onRequest,
      schema: doc({
        operationId: 'events.list',
        summary: 'List events, newest first',
        description: `With \`contactId\`, the contact's events are counted for \`total\`. ${HEAVY_CONTACT_EVENTS}`,
        query: listEventsQuery,
        responses: { 200: cursorList(eventSchema) },
        errors: [400, 503],
      }),
    },
    async (req) => {
      const { projectId } = projectOf(req);
      const q = parse(listEventsQuery, req.query);
      if (q.contactId === undefined) return listEvents(db, projectId, q);
      return readingContactEvents(ctx, projectId, q.contactId, (db) => listEvents(db, projectId, q));
    },
  );

  app.get(
    '/events/stats',
    {
      onRequest,
      schema: doc({ operationId: 'events.stats', summary: 'Event counts per name over a time range', query: rangeQuery, responses: { 200: eventStatsSchema } }),
    },
    async (req) => {
      const { projectId } = projectOf(req);
      const range = toTimeRange(parse(rangeQuery, req.query), ctx.clock.now());
      return asHeavyRead(ctx.heavyReads, projectId, () => eventStats(ctx.database, projectId, range));
    },
  );

  app.get(
    '/events/names',
    { onRequest, schema: doc({ operationId: 'events.names', summary: 'Distinct event names', responses: { 200: eventNamesSchema } }) },
    async (req) => {
      const names = await distinctEventNames(db, projectOf(req).projectId, MAX_LISTED_EVENT_NAMES + 1);
      return names.length > MAX_LISTED_EVENT_NAMES ? { names: names.slice(0, MAX_LISTED_EVENT_NAMES), truncated: true } : { names };
    },
  );

  app.get(
    '/events/contact/:contactId',
    {
      onRequest,
      schema: doc({
        operationId: 'events.listForContact',
        summary: "A contact's events, newest first",
        description: HEAVY_CONTACT_EVENTS,
        params: contactIdParams,
        query: contactEventsQuery,
        responses: { 200: z.union([cursorList(eventSchema), eventUsageSchema]) },
        errors: [400, 404, 503],
      }),
    },
    async (req) => {
      const { contactId } = parse(contactIdParams, req.params);
      // The static `contact` segment shadows `/events/:eventName/usage` for an event named "contact";
      // no contact id is "usage", so that path can only mean the event's usage.
      const { projectId } = projectOf(req);
      if (contactId === 'usage') return eventUsage(db, projectId, 'contact');
      const q = parse(contactEventsQuery, req.query);
      return readingContactEvents(ctx, projectId, contactId, (db) => listContactEvents(db, projectId, contactId, q));
    },
  );

  app.get(
    '/events/:eventName/usage',
    {
      onRequest,
      schema: doc({
        operationId: 'events.usage',
        summary: 'Segments, unfinished campaigns and workflows that use an event name',
        params: eventNameParams,
        responses: { 200: eventUsageSchema },
      }),
    },
    async (req) => eventUsage(db, projectOf(req).projectId, parse(eventNameParams, req.params).eventName),
  );

  app.delete(
    '/events/:eventName',
    {
      onRequest,
      schema: doc({
        operationId: 'events.deleteName',
        summary: 'Delete every event with this name',
        description: `Deletes the events in short batches and answers when all are gone (409 while a segment, a workflow or a campaign not yet sent (DRAFT, SCHEDULED, SENDING) uses the name). At most ${EVENT_DELETES_PER_PROJECT} delete of many events of a project at once (${EVENT_DELETES_PER_PROCESS} of all projects, per process; a contact delete of many events counts too); another is a 429 at once, with \`details.retryAfter\` and Retry-After. A batch held past 10 s (events locked by another delete) stops the delete with a 409 whose \`details.deleted\` counts the events gone; ask again to finish.`,
        params: eventNameParams,
        responses: { 204: null },
        errors: [400, 409, 429],
      }),
    },
    async (req, reply) => {
      await deleteEventName(ctx, projectOf(req).projectId, parse(eventNameParams, req.params).eventName);
      return reply.status(204).send();
    },
  );
}
