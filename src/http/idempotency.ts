import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../context.ts';
import type { QueueDef } from '../jobs/boss.ts';
import { ApiError, validationError } from './errors.ts';

declare module 'fastify' {
  interface FastifyRequest {
    idempotencyKey: string | null;
  }
}

const VALID_KEY = /^[\x20-\x7e]{1,255}$/;

type StoredKey = {
  method: string;
  path: string;
  status_code: number | null;
  response: unknown;
  created_at: Date;
};

/**
 * `Idempotency-Key` for /v1/send and /v1/track. The key is claimed (one INSERT, so of two
 * concurrent requests exactly one proceeds) before the handler runs. A 2xx or 5xx outcome keeps
 * the key until it expires; a 4xx releases it so a corrected request can reuse it. Any reuse while
 * the key is held is 409 IDEMPOTENCY_KEY_REUSED and performs nothing.
 */
export function idempotency(ctx: AppContext) {
  const preHandler = async (req: FastifyRequest): Promise<void> => {
    const header = req.headers['idempotency-key'];
    if (header === undefined) return;
    const key = Array.isArray(header) ? header[0] : header;
    if (!VALID_KEY.test(key)) {
      throw validationError([{ field: 'Idempotency-Key', code: 'invalid_string', message: 'Idempotency-Key must be 1-255 printable ASCII characters' }]);
    }
    const projectId = req.auth!.projectId;
    const path = req.url.split('?')[0];
    const claimed = await ctx.database.pool.query(
      `INSERT INTO idempotency_keys (project_id, key, method, path, created_at, expires_at)
            VALUES ($1, $2, $3, $4, now(), now() + make_interval(hours => $5))
       ON CONFLICT (project_id, key) DO UPDATE
            SET method = EXCLUDED.method, path = EXCLUDED.path, status_code = NULL, response = NULL,
                created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
          WHERE idempotency_keys.expires_at <= now()
       RETURNING 1`,
      [projectId, key, req.method, path, ctx.config.idempotencyKeyTtlHours],
    );
    if (claimed.rowCount === 1) {
      req.idempotencyKey = key;
      return;
    }
    const { rows } = await ctx.database.pool.query<StoredKey>(
      'SELECT method, path, status_code, response, created_at FROM idempotency_keys WHERE project_id = $1 AND key = $2',
      [projectId, key],
    );
    const original = rows[0];
    throw new ApiError(409, 'IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was already used; the request was not performed', {
      details: {
        key,
        originalRequest: original ? `${original.method} ${original.path}` : null,
        originalRequestAt: original?.created_at.toISOString() ?? null,
        originalStatusCode: original?.status_code ?? null,
        originalResponse: original?.response ?? null,
      },
    });
  };

  const onSend = async (req: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> => {
    const key = req.idempotencyKey;
    if (!key) return payload;
    const projectId = req.auth!.projectId;
    const status = reply.statusCode;
    if (status >= 400 && status < 500) {
      await ctx.database.pool.query('DELETE FROM idempotency_keys WHERE project_id = $1 AND key = $2', [projectId, key]);
    } else {
      const body = status < 300 && typeof payload === 'string' ? payload : null;
      await ctx.database.pool.query('UPDATE idempotency_keys SET status_code = $3, response = $4::jsonb WHERE project_id = $1 AND key = $2', [
        projectId,
        key,
        status,
        body,
      ]);
    }
    return payload;
  };

  return { preHandler, onSend };
}

/** Removes expired keys (hourly job). */
export async function purgeExpiredIdempotencyKeys(ctx: AppContext): Promise<number> {
  const { rowCount } = await ctx.database.pool.query('DELETE FROM idempotency_keys WHERE expires_at <= now()');
  return rowCount ?? 0;
}

export const idempotencyCleanupQueue: QueueDef<Record<string, never>> = {
  name: 'idempotency-cleanup',
  schema: z.object({}).strict() as z.ZodType<Record<string, never>>,
  handler: async (ctx) => void (await purgeExpiredIdempotencyKeys(ctx)),
  cron: '7 * * * *',
  retryLimit: 1,
};
