import type { FastifyInstance } from 'fastify';

/** [method, path] of every route, from Fastify's own route table (printRoutes' tree). */
export function routeTable(instance: FastifyInstance): [string, string][] {
  const out: [string, string][] = [];
  const stack: string[] = [];
  for (const line of instance.printRoutes({ commonPrefix: false }).split('\n')) {
    const m = /^([│ ]*)[├└]── (\S+)(?: \(([^)]*)\))?/.exec(line);
    if (!m) continue;
    const depth = m[1].length / 4;
    stack.length = depth;
    stack.push(m[2]);
    const path = stack.join('');
    for (const method of (m[3] ?? '').split(', ').filter(Boolean)) {
      if (method !== 'HEAD' && method !== 'OPTIONS') out.push([method, path]);
    }
  }
  return out;
}
