import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { withTransaction } from '../../db/client.ts';
import { projectOf, requireProject } from '../../http/auth.ts';
import { parse } from '../../http/validate.ts';
import { deleteField, fieldUsage, fieldValues, listFields } from './fields.ts';
import { listContacts } from './list.ts';
import {
  contactIdParams,
  fieldParams,
  fieldValuesQuery,
  listContactsQuery,
  lookupBody,
  parseCreateContact,
  updateContactBody,
} from './schemas.ts';
import { deleteContact, getContact, lookupContacts, patchContact, saveContact } from './service.ts';

export function contactRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireProject(ctx);
  const db = ctx.database.db;

  app.get('/contacts', { onRequest }, async (req) =>
    listContacts(db, projectOf(req).projectId, parse(listContactsQuery, req.query)),
  );

  app.post('/contacts', { onRequest }, async (req, reply) => {
    const result = await saveContact(ctx, projectOf(req).projectId, parseCreateContact(req.body));
    return reply
      .status(result.isNew ? 201 : 200)
      .send({ ...result.contact, _meta: { isNew: result.isNew, isUpdate: result.isUpdate } });
  });

  app.post('/contacts/lookup', { onRequest }, async (req) =>
    lookupContacts(db, projectOf(req).projectId, parse(lookupBody, req.body).emails),
  );

  app.get('/contacts/fields', { onRequest }, async (req) => listFields(db, projectOf(req).projectId));

  app.get('/contacts/fields/:field/values', { onRequest }, async (req) => {
    const { field } = parse(fieldParams, req.params);
    return fieldValues(db, projectOf(req).projectId, field, parse(fieldValuesQuery, req.query).limit);
  });

  app.get('/contacts/fields/:field/usage', { onRequest }, async (req) =>
    fieldUsage(db, projectOf(req).projectId, parse(fieldParams, req.params).field),
  );

  app.delete('/contacts/fields/:field', { onRequest }, async (req) => {
    const { field } = parse(fieldParams, req.params);
    const projectId = projectOf(req).projectId;
    return withTransaction(ctx.database, ({ tx }) => deleteField(tx, projectId, field, ctx.clock.now()));
  });

  app.get('/contacts/:id', { onRequest }, async (req) =>
    getContact(db, projectOf(req).projectId, parse(contactIdParams, req.params).id),
  );

  app.patch('/contacts/:id', { onRequest }, async (req) => {
    const { id } = parse(contactIdParams, req.params);
    return patchContact(ctx, projectOf(req).projectId, id, parse(updateContactBody, req.body ?? {}));
  });

  app.delete('/contacts/:id', { onRequest }, async (req, reply) => {
    await deleteContact(db, projectOf(req).projectId, parse(contactIdParams, req.params).id);
    return reply.status(204).send();
  });
}
