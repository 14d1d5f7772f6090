import { and, eq, lte, sql } from 'drizzle-orm';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../context.ts';
import { idempotencyKeys } from '../db/schema/idempotency.ts';
import type { QueueDef } from '../jobs/boss.ts';
import { ApiError, validationError } from './errors.ts';

declare module 'fastify' {
  interface FastifyRequest {
    idempotencyKey: string | null;
  }
}

const VALID_KEY = /^[\x20-\x7e]{1,255}$/;

type KeySpace = { projectId: string; keyType: 'secret' | 'public' };

/** The request's key space: its project's, and within it the kind of API key it came with (schema/idempotency.ts). */
const keySpaceOf = (req: FastifyRequest): KeySpace => ({ projectId: req.auth!.projectId, keyType: req.auth!.keyType ?? 'secret' });

const heldKey = (space: KeySpace, key: string) =>
  and(eq(idempotencyKeys.projectId, space.projectId), eq(idempotencyKeys.keyType, space.keyType), eq(idempotencyKeys.key, key));

/**
 * `Idempotency-Key` for /v1/send and /v1/track. The key is claimed (one INSERT, so of two
 * concurrent requests exactly one proceeds) before the handler runs. A 2xx or 5xx outcome keeps
 * the key until it expires; a 4xx releases it so a corrected request can reuse it. Any reuse while
 * the key is held is 409 IDEMPOTENCY_KEY_REUSED and performs nothing. Keys are the project's, the
 * secret key's apart from the public key's (whoever holds the public key, a web page's visitor,
 * must not block or read a send).
 */
export function idempotency(ctx: AppContext) {
  const preHandler = async (req: FastifyRequest): Promise<void> => {
    const header = req.headers['idempotency-key'];
    if (header === undefined) return;
    const key = Array.isArray(header) ? header[0] : header;
    if (!VALID_KEY.test(key)) {
      throw validationError([{ field: 'Idempotency-Key', code: 'invalid_string', message: 'Idempotency-Key must be 1-255 printable ASCII characters' }]);
    }
    const space = keySpaceOf(req);
    const path = req.url.split('?')[0];
    const claimed = await ctx.database.db.execute(sql`
      INSERT INTO idempotency_keys (project_id, key_type, key, method, path, created_at, expires_at)
           VALUES (${space.projectId}, ${space.keyType}, ${key}, ${req.method}, ${path}, now(), now() + make_interval(hours => ${ctx.config.idempotencyKeyTtlHours}))
      ON CONFLICT (project_id, key_type, key) DO UPDATE
           SET method = EXCLUDED.method, path = EXCLUDED.path, status_code = NULL, response = NULL,
               created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
         WHERE idempotency_keys.expires_at <= now()
      RETURNING 1`);
    if (claimed.rowCount === 1) {
      req.idempotencyKey = key;
      return;
    }
    const [original] = await ctx.database.db
      .select({
        method: idempotencyKeys.method,
        path: idempotencyKeys.path,
        statusCode: idempotencyKeys.statusCode,
        response: idempotencyKeys.response,
        createdAt: idempotencyKeys.createdAt,
      })
      .from(idempotencyKeys)
      .where(heldKey(space, key));
    throw new ApiError(409, 'IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was already used; the request was not performed', {
      details: {
        key,
        originalRequest: original ? `${original.method} ${original.path}` : null,
        originalRequestAt: original?.createdAt.toISOString() ?? null,
        originalStatusCode: original?.statusCode ?? null,
        originalResponse: original?.response ?? null,
      },
    });
  };

  const onSend = async (req: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> => {
    const key = req.idempotencyKey;
    if (!key) return payload;
    const space = keySpaceOf(req);
    const status = reply.statusCode;
    if (status >= 400 && status < 500) {
      await ctx.database.db.delete(idempotencyKeys).where(heldKey(space, key));
    } else {
      // The serialised 2xx body is stored as it was sent (parsed by PostgreSQL, not re-serialised here).
      const body = status < 300 && typeof payload === 'string' ? payload : null;
      await ctx.database.db
        .update(idempotencyKeys)
        .set({ statusCode: status, response: sql`${body}::jsonb` })
        .where(heldKey(space, key));
    }
    return payload;
  };

  return { preHandler, onSend };
}

/** Removes expired keys (hourly job). */
export async function purgeExpiredIdempotencyKeys(ctx: AppContext): Promise<number> {
  const { rowCount } = await ctx.database.db.delete(idempotencyKeys).where(lte(idempotencyKeys.expiresAt, sql`now()`));
  return rowCount ?? 0;
}

export const idempotencyCleanupQueue: QueueDef<Record<string, never>> = {
  name: 'idempotency-cleanup',
  schema: z.object({}).strict() as z.ZodType<Record<string, never>>,
  handler: async (ctx) => void (await purgeExpiredIdempotencyKeys(ctx)),
  cron: '7 * * * *',
  retryLimit: 1,
};
