import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { projectOf, requireProject } from '../../http/auth.ts';
import { cursorList, describe, simpleOrErrorSchema } from '../../http/openapi.ts';
import { parse } from '../../http/validate.ts';
import { COVERAGE_EXACT_UP_TO, deleteField, FIELD_DELETES_PER_PROCESS, FIELD_DELETES_PER_PROJECT, fieldUsage, fieldValues, listFields } from './fields.ts';
import { heavyReadNote } from '../../http/heavy-reads.ts';
import { CONTACTS_READ_STATEMENT_MS, contactsRead } from './heavy-read.ts';
import { listContacts } from './list.ts';
import {
  contactIdParams,
  contactSchema,
  createContactBody,
  fieldDeletedSchema,
  fieldListSchema,
  fieldParams,
  fieldUsageSchema,
  fieldValuesQuery,
  fieldValuesSchema,
  listContactsQuery,
  lookupBody,
  lookupResultSchema,
  normaliseEmail,
  parseCreateContact,
  savedContactSchema,
  updateContactBody,
} from './schemas.ts';
import { EVENT_DELETE_BATCH, EVENT_DELETES_PER_PROJECT } from '../events/usage.ts';
import { type UpsertResult, deleteContact, getContact, lookupContacts, patchContact } from './service.ts';
import { type ContactSave, saveContact, saveContacts } from './save.ts';
import { WRITE_GROUP_LIMITS, groupShareOfData, logGroupFailure, writeGroups } from '../../db/write-groups.ts';
import { dataBytes } from './custom-data.ts';

const EXAMPLE_CONTACT = {
  id: 'cnt_01j9z3k5e8f7g6h5j4k3m2n1p0',
  email: 'ada@example.com',
  subscribed: true,
  snoozedUntil: null,
  data: { firstName: 'Ada', plan: 'pro' },
  createdAt: '2026-01-01T12:00:00.000Z',
  updatedAt: '2026-01-02T08:30:00.000Z',
};

export function contactRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireProject(ctx);
  const db = ctx.database.db;
  const doc = (d: Omit<Parameters<typeof describe>[0], 'tag' | 'access'>) => describe({ tag: 'Contacts', access: 'project', ...d });
  // Concurrent POST /contacts of one project commit together, as tracks and sends do (db/write-groups.ts).
  const saves = writeGroups<ContactSave, UpsertResult>({
    ...WRITE_GROUP_LIMITS,
    conflictKeys: (save) => [normaliseEmail(save.input.email)],
    sizeOf: (save) => groupShareOfData(save.dataBytes),
    runOne: (save) => saveContact(ctx, save),
    runMany: (group) => saveContacts(ctx, group[0].projectId, group),
    onGroupFailed: (err, size) => logGroupFailure(ctx, 'contact upsert', err, size),
  });

  app.get(
    '/contacts',
    {
      onRequest,
      schema: doc({
        operationId: 'contacts.list',
        summary: 'List contacts',
        description: `Cursor-paginated; \`search\` matches the email, \`subscribed\` filters, \`sort\` is createdAt or email. ${heavyReadNote(
          'With a search (which reads and counts every contact it matches) or a `subscribed` filter (whose page walks the contacts until it has found its rows)',
          CONTACTS_READ_STATEMENT_MS,
        )}`,
        query: listContactsQuery,
        responses: {
          200: {
            schema: cursorList(contactSchema),
            example: { data: [EXAMPLE_CONTACT], cursor: 'eyJzIjoiMjAyNi0wMS0wMVQxMjowMDowMC4wMDAwMDBaIiwiaSI6ImNudF8wMWo5In0', hasMore: true, total: 1520 },
          },
        },
        errors: [400, 503],
      }),
    },
    async (req) => {
      const { projectId } = projectOf(req);
      const q = parse(listContactsQuery, req.query);
      // A search reads and counts every match, and a subscription's page walks the contacts until it
      // has found its rows (no index has the subscription): heavy reads. A plain page is an index range.
      const heavy = Boolean(q.search) || q.subscribed !== undefined;
      return heavy ? contactsRead(ctx, projectId, (tx) => listContacts(tx, projectId, q)) : listContacts(db, projectId, q);
    },
  );

  app.post(
    '/contacts',
    {
      onRequest,
      schema: doc({
        operationId: 'contacts.upsert',
        summary: 'Create a contact, or update the one with this email',
        body: createContactBody,
        bodyExample: { email: 'ada@example.com', subscribed: true, data: { plan: 'pro', firstName: 'Ada' } },
        responses: {
          201: { schema: savedContactSchema, description: 'Created' },
          200: { schema: savedContactSchema, description: 'An existing contact, updated' },
          400: {
            schema: simpleOrErrorSchema,
            description: 'Missing `email`: the simple body `{ error: "email is required" }`; a body that is not JSON: the full error body',
          },
        },
        errors: [402],
      }),
    },
    async (req, reply) => {
      const { projectId } = projectOf(req);
      const input = parseCreateContact(req.body);
      const result = await saves.submit(projectId, { projectId, input, dataBytes: dataBytes(input.data) });
      return reply.status(result.isNew ? 201 : 200).send({ ...result.contact, _meta: { isNew: result.isNew, isUpdate: result.isUpdate } });
    },
  );

  app.post(
    '/contacts/lookup',
    {
      onRequest,
      schema: doc({
        operationId: 'contacts.lookup',
        answeredWhenDiskFull: true,
        summary: 'Find contacts by email (up to 500)',
        body: lookupBody,
        responses: { 200: lookupResultSchema },
      }),
    },
    async (req) => lookupContacts(db, projectOf(req).projectId, parse(lookupBody, req.body).emails),
  );

  app.get(
    '/contacts/fields',
    {
      onRequest,
      schema: doc({
        operationId: 'contacts.fields',
        summary: 'List contact fields with type and coverage',
        description: `\`coverage\` is the share of contacts with a value (not null) at the field's path. Past ${COVERAGE_EXACT_UP_TO.toLocaleString('en-US')} contacts it is the share among the contacts of one hash bucket, ${(COVERAGE_EXACT_UP_TO / 2).toLocaleString('en-US')} to ${COVERAGE_EXACT_UP_TO.toLocaleString('en-US')} of them (a standard error under a quarter of a percentage point).`,
        responses: { 200: fieldListSchema },
        errors: [503],
      }),
    },
    async (req) => {
      const { projectId } = projectOf(req);
      return contactsRead(ctx, projectId, (tx) => listFields(tx, projectId));
    },
  );

  app.get(
    '/contacts/fields/:field/values',
    {
      onRequest,
      schema: doc({
        operationId: 'contacts.fieldValues',
        summary: 'Distinct values of a field',
        params: fieldParams,
        query: fieldValuesQuery,
        responses: { 200: fieldValuesSchema },
        errors: [400, 503],
      }),
    },
    async (req) => {
      const { projectId } = projectOf(req);
      const { field } = parse(fieldParams, req.params);
      const { limit } = parse(fieldValuesQuery, req.query);
      return contactsRead(ctx, projectId, (tx) => fieldValues(tx, projectId, field, limit));
    },
  );

  app.get(
    '/contacts/fields/:field/usage',
    {
      onRequest,
      schema: doc({
        operationId: 'contacts.fieldUsage',
        summary: 'Segments, campaigns and workflows that use a field',
        params: fieldParams,
        responses: { 200: fieldUsageSchema },
        errors: [400, 503],
      }),
    },
    async (req) => {
      const { projectId } = projectOf(req);
      const { field } = parse(fieldParams, req.params);
      return contactsRead(ctx, projectId, (tx) => fieldUsage(tx, projectId, field));
    },
  );

  app.delete(
    '/contacts/fields/:field',
    {
      onRequest,
      schema: doc({
        operationId: 'contacts.deleteField',
        summary: 'Remove a custom field from every contact',
        description: `Rewrites the project's contacts in short batches and answers when all are done. At most ${FIELD_DELETES_PER_PROJECT} field delete of a project at once (${FIELD_DELETES_PER_PROCESS} of all projects, per process); another is a 429 at once, with \`details.retryAfter\` and Retry-After. A batch held past 10 s (contacts locked by other writes) stops the delete with a 409 whose \`details.deletedFrom\` counts the contacts done; ask again to finish.`,
        params: fieldParams,
        responses: { 200: fieldDeletedSchema },
        errors: [400, 404, 409, 429],
      }),
    },
    async (req) => deleteField(ctx, projectOf(req).projectId, parse(fieldParams, req.params).field),
  );

  app.get(
    '/contacts/:id',
    {
      onRequest,
      schema: doc({
        operationId: 'contacts.get',
        summary: 'Get a contact',
        params: contactIdParams,
        responses: { 200: { schema: contactSchema, example: EXAMPLE_CONTACT } },
        errors: [404],
      }),
    },
    async (req) => getContact(db, projectOf(req).projectId, parse(contactIdParams, req.params).id),
  );

  app.patch(
    '/contacts/:id',
    {
      onRequest,
      schema: doc({
        operationId: 'contacts.update',
        summary: 'Update a contact (only the keys sent change)',
        params: contactIdParams,
        body: updateContactBody,
        bodyExample: { subscribed: false, data: { plan: null } },
        responses: { 200: contactSchema },
        errors: [404, 409],
      }),
    },
    async (req) => {
      const { id } = parse(contactIdParams, req.params);
      return patchContact(ctx, projectOf(req).projectId, id, parse(updateContactBody, req.body ?? {}));
    },
  );

  app.delete(
    '/contacts/:id',
    {
      onRequest,
      schema: doc({
        operationId: 'contacts.delete',
        summary: 'Delete a contact',
        description: `Its events go with it. A contact with many events (over ${EVENT_DELETE_BATCH.first.toLocaleString('en-US')}) has them deleted in short batches first, which counts as one of the project's deletes of many events (${EVENT_DELETES_PER_PROJECT} at once, as DELETE /events/{eventName}): another under way is a 429 at once, with \`details.retryAfter\` and Retry-After. A batch held past 10 s stops the delete with a 409 whose \`details.deleted\` counts the events gone (the contact stays); ask again to finish.`,
        params: contactIdParams,
        responses: { 204: null },
        errors: [404, 409, 429],
      }),
    },
    async (req, reply) => {
      await deleteContact(ctx, projectOf(req).projectId, parse(contactIdParams, req.params).id);
      return reply.status(204).send();
    },
  );
}
