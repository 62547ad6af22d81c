// Liveness and readiness. /readyz turns 200 once the host-cluster caches have synced.
import { objectOf, PUBLIC, schemaOf, stringEnum, type App } from '../schemas.js';

const ok = objectOf({ status: stringEnum(['ok']) });
const schema = schemaOf('health');

export default async function healthRoutes(app: App) {
  app.get(
    '/healthz',
    { schema: schema('The process is alive', { security: PUBLIC, response: { 200: ok } }) },
    async () => ({ status: 'ok' as const }),
  );
  app.get(
    '/readyz',
    {
      schema: schema('The host-cluster caches have synced (503 until then)', {
        security: PUBLIC,
        response: { 200: ok },
      }),
    },
    async (_request, reply) => {
      if (!app.services.host.synced) {
        return reply.code(503).send({ error: 'host caches not synced yet', reason: 'ServiceUnavailable', code: 503 });
      }
      return { status: 'ok' as const };
    },
  );
}
