// GET /metrics: the Prometheus exposition of this gateway replica (docs/operations.md). Like the
// kube-apiserver's /metrics it needs an admin principal (an admin API key works as Prometheus'
// bearer token) unless KITELINE_METRICS_PUBLIC=true serves it to anyone.
import { PUBLIC, schemaOf, SIGNED_IN, streamed, type App } from '../schemas.js';

export default async function metricsRoutes(app: App) {
  const { config, metrics } = app.services;
  app.get(
    '/metrics',
    {
      ...(config.metricsPublic ? {} : { preHandler: app.requireAdmin }),
      schema: schemaOf('health')('Prometheus metrics of this gateway replica', {
        description: config.metricsPublic
          ? 'Served without authentication (KITELINE_METRICS_PUBLIC=true).'
          : "Needs an admin principal: an admin API key (e.g. as Prometheus' bearer token) or an admin session. " +
            'KITELINE_METRICS_PUBLIC=true serves it without authentication.',
        security: config.metricsPublic ? PUBLIC : SIGNED_IN,
        response: { 200: streamed({ description: 'Prometheus text exposition format 0.0.4', type: 'string' }) },
      }),
    },
    async (_request, reply) => {
      const text = await metrics.scrape();
      return reply.type(metrics.contentType).send(text);
    },
  );
}
