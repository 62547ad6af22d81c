// One log line per request: request id, method, route, status, duration, and the user and cluster
// that later plugins attach. Headers and bodies are never logged. A request whose client left before
// its answer never completes a response (Fastify runs no onResponse hook for it): its line is
// written when the handler's answer (usually the 499 of a client gone) is about to be sent instead.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { fixedFieldLogger } from '../../log.js';

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
    app.decorateRequest('clientGone', false);
    app.decorateRequest('clusterName', undefined);
    app.addHook('onRequestAbort', (request, done) => {
      request.clientGone = true;
      done();
    });
    // One onSend and one onResponse hook for every "request done" consumer (this log line, the
    // audit), in callback style: they run for every request, and a promise per hook per request
    // is measurable on the hot path (docs/benchmarks.md).
    const doneCallbacks: ((request: FastifyRequest, reply: FastifyReply) => void)[] = [];
    app.decorate('onRequestDone', (done: (request: FastifyRequest, reply: FastifyReply) => void) => {
      doneCallbacks.push(done);
    });
    const runDone = (request: FastifyRequest, reply: FastifyReply) => {
      for (const done of doneCallbacks) {
        try {
          done(request, reply);
        } catch (err) {
          request.log.error({ err }, 'a request-done hook failed');
        }
      }
    };
    app.addHook('onSend', (request, reply, payload, done) => {
      reply.header('x-request-id', request.id);
      if (request.clientGone) runDone(request, reply);
      done(null, payload);
    });
    app.addHook('onResponse', (request, reply, done) => {
      if (!request.clientGone) runDone(request, reply);
      done();
    });
    // Every field below is fixed here and none holds a secret: no redaction pass (log.ts).
    const lines = fixedFieldLogger(app.services.log);
    app.onRequestDone((request, reply) => {
      lines.info(
        {
          reqId: request.id,
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
