// One log line per request: request id, method, route, status, duration, and the user and cluster
// that later plugins attach. Headers and bodies are never logged. A request whose client left before
// its answer never completes a response (Fastify runs no onResponse hook for it): its line is
// written when the handler's answer (usually the 499 of a client gone) is about to be sent instead.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyRequest {
    /** Who is calling, for logs and audit; set by authentication. */
    actor: string | undefined;
    /** The target cluster's name, for logs and metrics; set by cluster selection. */
    clusterName: string | undefined;
    /** The client closed the connection before the answer was complete. */
    clientGone: boolean;
  }
  interface FastifyInstance {
    /**
     * Runs `done` once per request when it is over: after the response for a client that stayed,
     * when the answer is ready for one that left (request log, audit).
     */
    onRequestDone(done: (request: FastifyRequest, reply: FastifyReply) => void): void;
  }
}

export default fp(
  async function requestLog(app: FastifyInstance) {
    app.decorateRequest('actor', undefined);
    app.decorateRequest('clusterName', undefined);
    app.decorateRequest('clientGone', false);
    app.addHook('onRequestAbort', async (request) => {
      request.clientGone = true;
    });
    app.decorate('onRequestDone', (done: (request: FastifyRequest, reply: FastifyReply) => void) => {
      app.addHook('onSend', async (request, reply) => {
        if (request.clientGone) done(request, reply);
      });
      app.addHook('onResponse', async (request, reply) => {
        if (!request.clientGone) done(request, reply);
      });
    });
    app.addHook('onSend', async (request, reply) => {
      reply.header('x-request-id', request.id);
    });
    app.onRequestDone((request, reply) => {
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
