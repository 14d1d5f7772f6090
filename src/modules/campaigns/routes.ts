import { heavyNumberedList } from '../../db/page-budget.ts';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { projectOf, requireProject } from '../../http/auth.ts';
import { describer, envelope, pageListOf } from '../../http/openapi.ts';
import { parse } from '../../http/validate.ts';
import {
  campaignIdParams,
  campaignSchema,
  campaignSendResultSchema,
  campaignStatsSchema,
  createCampaignBody,
  listCampaignsQuery,
  sendCampaignBody,
  testCampaignBody,
  testSendResultSchema,
  updateCampaignBody,
} from './schemas.ts';
import { cancelCampaign, sendCampaign } from './sending.ts';
import { campaignRow, createCampaign, deleteCampaign, duplicateCampaign, getCampaign, listCampaigns, updateCampaign } from './service.ts';
import { campaignStats } from './stats.ts';
import { sendTestEmail } from './test-send.ts';

export function campaignRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireProject(ctx);
  const doc = describer('Campaigns', 'project');
  const idOf = (params: unknown) => parse(campaignIdParams, params).id;

  app.get(
    '/campaigns',
    {
      schema: doc({
        operationId: 'campaigns.list',
        summary: 'List campaigns',
        description: heavyNumberedList('campaigns'),
        query: listCampaignsQuery,
        responses: { 200: pageListOf(campaignSchema) },
        errors: [400, 503],
      }),
      onRequest,
    },
    async (req) => listCampaigns(ctx, projectOf(req).projectId, parse(listCampaignsQuery, req.query)),
  );

  app.post(
    '/campaigns',
    {
      schema: doc({
        operationId: 'campaigns.create',
        summary: 'Create a DRAFT campaign',
        description: 'SEGMENT audiences need `segmentId`; FILTERED ones need `audienceCondition`. The sender domain must be verified.',
        body: createCampaignBody,
        bodyExample: { name: 'May newsletter', subject: 'What is new in May', body: '<p>Hello {{firstName}}</p>', from: 'news@acme.test', audienceType: 'ALL' },
        responses: { 201: envelope(campaignSchema) },
        errors: [400, 403, 404],
      }),
      onRequest,
    },
    async (req, reply) => {
      const campaign = await createCampaign(ctx, projectOf(req).projectId, parse(createCampaignBody, req.body));
      return reply.status(201).send({ success: true, data: campaign });
    },
  );

  app.get(
    '/campaigns/:id',
    {
      schema: doc({ operationId: 'campaigns.get', summary: 'Get a campaign', params: campaignIdParams, responses: { 200: campaignSchema }, errors: [404] }),
      onRequest,
    },
    async (req) => getCampaign(ctx, projectOf(req).projectId, idOf(req.params)),
  );

  app.put(
    '/campaigns/:id',
    {
      schema: doc({
        operationId: 'campaigns.update',
        summary: 'Update a DRAFT campaign',
        params: campaignIdParams,
        body: updateCampaignBody,
        responses: { 200: campaignSchema },
        errors: [400, 403, 404, 409],
      }),
      onRequest,
    },
    async (req) => updateCampaign(ctx, projectOf(req).projectId, idOf(req.params), parse(updateCampaignBody, req.body ?? {})),
  );

  app.delete(
    '/campaigns/:id',
    {
      schema: doc({ operationId: 'campaigns.delete', summary: 'Delete a campaign', params: campaignIdParams, responses: { 204: null }, errors: [404, 409] }),
      onRequest,
    },
    async (req, reply) => {
      await deleteCampaign(ctx, projectOf(req).projectId, idOf(req.params));
      return reply.status(204).send();
    },
  );

  app.post(
    '/campaigns/:id/duplicate',
    {
      schema: doc({
        operationId: 'campaigns.duplicate',
        summary: 'Copy a campaign as a new DRAFT',
        params: campaignIdParams,
        responses: { 201: campaignSchema },
        errors: [404],
      }),
      onRequest,
    },
    async (req, reply) => reply.status(201).send(await duplicateCampaign(ctx, projectOf(req).projectId, idOf(req.params))),
  );

  app.post(
    '/campaigns/:id/send',
    {
      schema: doc({
        operationId: 'campaigns.send',
        summary: 'Send now, or schedule with scheduledFor',
        params: campaignIdParams,
        body: sendCampaignBody,
        bodyExample: { scheduledFor: '2026-06-01T09:00:00Z' },
        responses: { 200: campaignSendResultSchema },
        errors: [400, 402, 403, 404, 409],
      }),
      onRequest,
    },
    async (req) => sendCampaign(ctx, projectOf(req).projectId, idOf(req.params), parse(sendCampaignBody, req.body ?? {})),
  );

  app.post(
    '/campaigns/:id/cancel',
    {
      schema: doc({
        operationId: 'campaigns.cancel',
        answeredWhenDiskFull: true,
        summary: 'Cancel a SCHEDULED or SENDING campaign',
        params: campaignIdParams,
        responses: { 200: campaignSchema },
        errors: [404, 409],
      }),
      onRequest,
    },
    async (req) => cancelCampaign(ctx, projectOf(req).projectId, idOf(req.params)),
  );

  app.post(
    '/campaigns/:id/test',
    {
      schema: doc({
        operationId: 'campaigns.sendTest',
        summary: 'Send a test copy to one address',
        params: campaignIdParams,
        body: testCampaignBody,
        responses: { 200: testSendResultSchema },
        errors: [400, 402, 403, 404],
      }),
      onRequest,
    },
    async (req) => sendTestEmail(ctx, projectOf(req).projectId, idOf(req.params), parse(testCampaignBody, req.body).email),
  );

  app.get(
    '/campaigns/:id/stats',
    {
      schema: doc({
        operationId: 'campaigns.stats',
        summary: 'Delivery, open and click counts and rates',
        params: campaignIdParams,
        responses: { 200: campaignStatsSchema },
        errors: [404],
      }),
      onRequest,
    },
    async (req) => {
      const row = await campaignRow(ctx.database.db, projectOf(req).projectId, idOf(req.params));
      return campaignStats(ctx.database.db, row);
    },
  );
}
