import type { FastifyInstance } from 'fastify';
import FindMyWay, { type HTTPMethod } from 'find-my-way';

const METHODS: HTTPMethod[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/**
 * Remembers every route's path and method (registered before any route) so that a request to a
 * known path with the wrong method is answered 405 with `Allow`, not 404.
 */
export function trackRouteMethods(app: FastifyInstance): (path: string) => string[] {
  const router = FindMyWay({ ignoreTrailingSlash: true, maxParamLength: 1000 });
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) {
      if (!METHODS.includes(method as HTTPMethod)) continue;
      try {
        router.on(method as HTTPMethod, route.url, () => {});
      } catch {
        // already known (the same path registered twice for one method)
      }
    }
  });
  return (path) => {
    try {
      return METHODS.filter((m) => router.find(m, path) !== null);
    } catch {
      return [];
    }
  };
}
