// Liveness and readiness. /readyz turns 200 once the host-cluster caches have synced.
import type { FastifyInstance } from 'fastify';
import { objectOf, PUBLIC, replies } from '../schemas.js';

const ok = objectOf({ status: { type: 'string', enum: ['ok'] } });

export default async function healthRoutes(app: FastifyInstance) {
  app.get('/healthz', { schema: { tags: ['health'], summary: 'The process is alive', security: PUBLIC, response: replies({ 200: ok }) } }, async () => ({
    status: 'ok',
  }));
  app.get(
    '/readyz',
    {
      schema: {
        tags: ['health'],
        summary: 'The host-cluster caches have synced (503 until then)',
        security: PUBLIC,
        response: replies({ 200: ok }),
      },
    },
    async (_request, reply) => {
      if (!app.services.host.synced) {
        return reply.code(503).send({ error: 'host caches not synced yet', reason: 'ServiceUnavailable', code: 503 });
      }
      return { status: 'ok' };
    },
  );
}
