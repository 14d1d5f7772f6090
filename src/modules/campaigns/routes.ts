import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { projectOf, requireProject } from '../../http/auth.ts';
import { parse } from '../../http/validate.ts';
import {
  campaignIdParams,
  createCampaignBody,
  listCampaignsQuery,
  sendCampaignBody,
  testCampaignBody,
  updateCampaignBody,
} from './schemas.ts';
import { cancelCampaign, sendCampaign } from './sending.ts';
import {
  campaignRow,
  createCampaign,
  deleteCampaign,
  duplicateCampaign,
  getCampaign,
  listCampaigns,
  updateCampaign,
} from './service.ts';
import { campaignStats } from './stats.ts';
import { sendTestEmail } from './test-send.ts';
import './usage.ts';

export function campaignRoutes(app: FastifyInstance, ctx: AppContext): void {
  const onRequest = requireProject(ctx);
  const idOf = (params: unknown) => parse(campaignIdParams, params).id;

  app.get('/campaigns', { onRequest }, async (req) => listCampaigns(ctx, projectOf(req).projectId, parse(listCampaignsQuery, req.query)));

  app.post('/campaigns', { onRequest }, async (req, reply) => {
    const campaign = await createCampaign(ctx, projectOf(req).projectId, parse(createCampaignBody, req.body));
    return reply.status(201).send({ success: true, data: campaign });
  });

  app.get('/campaigns/:id', { onRequest }, async (req) => getCampaign(ctx, projectOf(req).projectId, idOf(req.params)));

  app.put('/campaigns/:id', { onRequest }, async (req) =>
    updateCampaign(ctx, projectOf(req).projectId, idOf(req.params), parse(updateCampaignBody, req.body ?? {})),
  );

  app.delete('/campaigns/:id', { onRequest }, async (req, reply) => {
    await deleteCampaign(ctx, projectOf(req).projectId, idOf(req.params));
    return reply.status(204).send();
  });

  app.post('/campaigns/:id/duplicate', { onRequest }, async (req, reply) =>
    reply.status(201).send(await duplicateCampaign(ctx, projectOf(req).projectId, idOf(req.params))),
  );

  app.post('/campaigns/:id/send', { onRequest }, async (req) =>
    sendCampaign(ctx, projectOf(req).projectId, idOf(req.params), parse(sendCampaignBody, req.body ?? {})),
  );

  app.post('/campaigns/:id/cancel', { onRequest }, async (req) => cancelCampaign(ctx, projectOf(req).projectId, idOf(req.params)));

  app.post('/campaigns/:id/test', { onRequest }, async (req) =>
    sendTestEmail(ctx, projectOf(req).projectId, idOf(req.params), parse(testCampaignBody, req.body).email),
  );

  app.get('/campaigns/:id/stats', { onRequest }, async (req) => {
    const row = await campaignRow(ctx.database.db, projectOf(req).projectId, idOf(req.params));
    return campaignStats(ctx.database.db, row);
  });
}
