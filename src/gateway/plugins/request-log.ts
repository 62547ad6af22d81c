// One log line per request: request id, method, route, status, duration, and the user and cluster
// that later plugins attach. Headers and bodies are never logged.
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyRequest {
    /** Who is calling, for logs and audit; set by authentication. */
    actor: string | undefined;
    /** The target cluster's name, for logs and metrics; set by cluster selection. */
    clusterName: string | undefined;
  }
}

export default fp(
  async function requestLog(app: FastifyInstance) {
    app.decorateRequest('actor', undefined);
    app.decorateRequest('clusterName', undefined);
    app.addHook('onSend', async (request, reply) => {
      reply.header('x-request-id', request.id);
    });
    app.addHook('onResponse', async (request, reply) => {
      request.log.info(
        {
          method: request.method,
          route: request.routeOptions.url ?? 'unmatched',
          path: request.url.split('?')[0],
          status: reply.statusCode,
          durationMs: Math.round(reply.elapsedTime * 10) / 10,
          user: request.actor,
          cluster: request.clusterName,
        },
        'request',
      );
    });
  },
  { name: 'kiteline-request-log' },
);
