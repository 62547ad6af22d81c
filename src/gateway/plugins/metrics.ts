// Counts every answered request into the gateway's metrics: route pattern ('unmatched' when no
// route matched, so random paths cannot grow the label set), method, status, target cluster and
// duration; failed password logins by reason, told apart by the answer's status.
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { LoginFailureReason } from '../../metrics/metrics.js';

const LOGIN_ROUTE = '/api/auth/login/password';
const LOGIN_FAILURES: Record<number, LoginFailureReason> = {
  400: 'bad_request',
  401: 'bad_credentials',
  403: 'disabled',
  429: 'throttled',
};

export default fp(
  async function metrics(app: FastifyInstance) {
    const metrics = app.services.metrics;
    // Callback style: no promise per request (this hook runs for every request).
    app.addHook('onResponse', (request, reply, done) => {
      const route = request.routeOptions.url ?? 'unmatched';
      const status = reply.statusCode;
      metrics.observeRequest(route, request.method, status, request.clusterName ?? '', reply.elapsedTime / 1000);
      if (route === LOGIN_ROUTE && status >= 400) {
        const reason = LOGIN_FAILURES[status];
        if (reason) metrics.loginFailed(reason);
      }
      done();
    });
  },
  { name: 'kiteline-metrics', dependencies: ['kiteline-request-log'] },
);
