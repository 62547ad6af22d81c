// Builds the Fastify application: plugins (errors, request log), then the route modules.
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import sensible from '@fastify/sensible';
import errors from './plugins/errors.js';
import requestLog from './plugins/request-log.js';
import healthRoutes from './routes/health.js';
import type { Services } from './services.js';

declare module 'fastify' {
  interface FastifyInstance {
    services: Services;
  }
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

export async function buildApp(services: Services): Promise<FastifyInstance> {
  const app: FastifyInstance = Fastify({
    loggerInstance: services.log as FastifyBaseLogger,
    disableRequestLogging: true,
    bodyLimit: services.config.bodyLimitBytes,
    trustProxy: true,
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    routerOptions: { ignoreTrailingSlash: false, maxParamLength: 1000 },
    ajv: { customOptions: { removeAdditional: false, coerceTypes: 'array', allErrors: false } },
  });
  app.decorate('services', services);
  await app.register(sensible);
  await app.register(errors);
  await app.register(requestLog);
  await app.register(healthRoutes);
  return app;
}
