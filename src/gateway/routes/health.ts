// Liveness and readiness. /readyz turns 200 once the host-cluster caches have synced.
import type { FastifyInstance } from 'fastify';

export default async function healthRoutes(app: FastifyInstance) {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    if (!app.services.host.synced) {
      return reply.code(503).send({ error: 'host caches not synced yet', reason: 'ServiceUnavailable', code: 503 });
    }
    return { status: 'ok' };
  });
}
