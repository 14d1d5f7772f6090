import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { type SecretCheck, currentSecretCheck } from './secret-check.ts';
import { describe } from '../../http/openapi.ts';
import { SANDBOX_DOMAIN } from '../domains/sandbox.ts';

const checks = z.object({
  database: z.enum(['ok', 'unavailable']),
  secrets: z.enum(['ok', 'mismatch', 'unknown']),
  /** The database's disk against DATABASE_MIN_FREE_MB (db/disk-room.ts): `low` while writes that add data are refused, `filling` while the heaviest writers' are. */
  disk: z.enum(['ok', 'filling', 'low', 'unwatched']),
});

export function systemRoutes(app: FastifyInstance, ctx: AppContext): void {
  // 200 when the database answers (as the spec says): `ok`, or `degraded` when this process's
  // JWT_SECRET is not the installation's (secret-check.ts) or the database's disk is below twice its
  // floor (db/disk-room.ts); 503 `unavailable` without a database.
  app.get(
    '/health',
    {
      schema: describe({
        operationId: 'meta.health',
        summary: "Liveness, database reachability, whether this process shares the installation's JWT_SECRET, and the database disk's room",
        tag: 'Meta',
        access: 'none',
        responses: {
          200: z.object({ status: z.enum(['ok', 'degraded']), checks }),
          503: { schema: z.object({ status: z.literal('unavailable'), checks }), description: 'The database is unreachable' },
        },
      }),
    },
    async (_req, reply) => {
      const disk = ctx.diskRoom.watched ? ctx.diskRoom.level() : 'unwatched';
      let secrets: SecretCheck;
      try {
        secrets = await currentSecretCheck(ctx.database, ctx.config.jwtSecret);
      } catch {
        return reply.status(503).send({ status: 'unavailable', checks: { database: 'unavailable', secrets: 'unknown', disk } });
      }
      const status = secrets === 'mismatch' || disk === 'low' || disk === 'filling' ? 'degraded' : 'ok';
      return { status, checks: { database: 'ok', secrets, disk } };
    },
  );

  app.get(
    '/config',
    {
      schema: describe({
        operationId: 'meta.config',
        summary: 'Public server configuration for the dashboard',
        tag: 'Meta',
        access: 'none',
        responses: {
          200: z.object({
            signupEnabled: z.boolean(),
            smtpConfigured: z.boolean(),
            sandboxDomain: z.string().nullable().describe('While mail is captured (no SMTP_URL): the domain any project may send from without verifying one'),
            billingEnabled: z.boolean(),
            oauth: z.object({ github: z.boolean(), google: z.boolean() }),
            publicUrl: z.string(),
          }),
        },
      }),
    },
    async () => ({
      signupEnabled: !ctx.config.disableSignup,
      smtpConfigured: Boolean(ctx.config.smtpUrl),
      sandboxDomain: ctx.config.smtpUrl ? null : SANDBOX_DOMAIN,
      billingEnabled: Boolean(ctx.config.stripeSecretKey),
      oauth: { github: false, google: false },
      publicUrl: ctx.config.publicUrl,
    }),
  );
}
