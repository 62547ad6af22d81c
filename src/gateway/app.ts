// Builds the Fastify application: plugins (errors, request log), then the route modules.
import { requestIdOf } from '../log.js';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import sensible from '@fastify/sensible';
import errors, { frameworkError } from './plugins/errors.js';
import openapi from './plugins/openapi.js';
import audit from './plugins/audit.js';
import clusterPrefix, { rewriteClusterPath } from './plugins/cluster-prefix.js';
import authenticate from './plugins/authenticate.js';
import sameOrigin from './plugins/same-origin.js';
import metrics from './plugins/metrics.js';
import requestLog from './plugins/request-log.js';
import upgrades from './plugins/upgrades.js';
import apiKeyRoutes from './routes/apikeys.js';
import auditLogRoutes from './routes/audit-logs.js';
import sessionRoutes from './routes/sessions.js';
import authRoutes from './routes/auth.js';
import clusterRoutes from './routes/clusters.js';
import describeRoutes from './routes/describe.js';
import healthRoutes from './routes/health.js';
import imageTagRoutes from './routes/image-tags.js';
import initRoutes from './routes/init.js';
import k8sProxyRoutes from './routes/k8s-proxy.js';
import fleetHopRoutes from './routes/fleet-hop.js';
import kubeconfigRoutes from './routes/kubeconfig.js';
import ldapSettingRoutes from './routes/ldap-setting.js';
import logRoutes from './routes/logs.js';
import mcpRoutes from './routes/mcp.js';
import metricsRoutes from './routes/metrics.js';
import oauthProviderRoutes from './routes/oauth-providers.js';
import overviewRoutes from './routes/overview.js';
import podFileRoutes from './routes/pod-files.js';
import podWatchRoutes from './routes/pod-watch.js';
import preferenceRoutes from './routes/preferences.js';
import prometheusRoutes from './routes/prometheus.js';
import relatedRoutes from './routes/related.js';
import resourceRoutes from './routes/resources.js';
import roleRoutes from './routes/roles.js';
import searchRoutes from './routes/search.js';
import secondFactorRoutes from './routes/second-factors.js';
import settingRoutes from './routes/settings.js';
import terminalRoutes from './routes/terminal.js';
import templateRoutes from './routes/templates.js';
import helmRoutes from './routes/helm.js';
import toolRoutes from './routes/tools.js';
import uiRoutes from './routes/ui.js';
import userRoutes from './routes/users.js';
import workloadProxyRoutes from './routes/workload-proxy.js';
import { stripBasePath } from './base-path.js';
import { LazySchemas } from './lazy-schemas.js';
import { eventStreamConstraint, type App } from './schemas.js';
import type { Services } from './services.js';

declare module 'fastify' {
  interface FastifyInstance {
    services: Services;
  }
}

/** How often the HTTP server looks for requests past their headers or request deadline. */
const TIMEOUT_CHECK_INTERVAL_MS = 1000;

export async function buildApp(services: Services, schemas = new LazySchemas()): Promise<FastifyInstance> {
  // TypeBox types request.body/query/params and the answers from each route's schemas
  // (schemas.ts). Validation stays Ajv's, with the options below: same checks, same messages.
  const app: App = Fastify({
    // pino's Logger is a FastifyBaseLogger; the cast keeps Fastify's generic at the base type.
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion
    loggerInstance: services.log as FastifyBaseLogger,
    // Fastify's own per-request lines are off: plugins/request-log.ts writes one line per request.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: services.config.bodyLimitBytes,
    // Slow clients are cut off: the headers (slowloris) and the whole request have deadlines, checked
    // every second, and a connection on which nothing moves is closed (a watch or a delete that
    // waits lifts that for itself: resources/cluster-slot.ts).
    connectionTimeout: services.config.idleTimeoutMs,
    requestTimeout: services.config.requestTimeoutMs,
    http: {
      headersTimeout: services.config.headersTimeoutMs,
      requestTimeout: services.config.requestTimeoutMs,
      connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS,
    },
    // X-Forwarded-* only from configured proxies: the client address is not the client's to choose.
    trustProxy: services.config.trustProxy,
    requestIdHeader: false,
    genReqId: (req) => requestIdOf(req.headers),
    // A sub-path install's base path goes first (base-path.ts), then Kite's newest spelling of a
    // cluster route, /api/v1/_clusters/<cluster>/... (plugins/cluster-prefix.ts).
    rewriteUrl: (req) => {
      stripBasePath(req, services.config.basePath);
      return rewriteClusterPath(req);
    },
    // A URL the router cannot decode: the same JSON error as everything else (plugins/errors.ts).
    frameworkErrors: frameworkError,
    routerOptions: {
      ignoreTrailingSlash: false,
      maxParamLength: 1000,
      constraints: { eventStream: eventStreamConstraint },
    },
    ajv: { customOptions: { removeAdditional: false, coerceTypes: 'array', allErrors: false } },
    // Fastify's own compilers, each route's run at its first use or after listen (lazy-schemas.ts).
    schemaController: { compilersFactory: schemas.compilersFactory },
  }).withTypeProvider<TypeBoxTypeProvider>();
  app.decorate('services', services);
  await app.register(sensible);
  await app.register(errors);
  await app.register(requestLog);
  await app.register(authenticate);
  await app.register(clusterPrefix);
  await app.register(sameOrigin);
  await app.register(metrics);
  await app.register(audit);
  await app.register(upgrades);
  // Before any route: the OpenAPI document collects every route registered after it.
  await app.register(openapi);
  await app.register(healthRoutes);
  await app.register(metricsRoutes);
  await app.register(initRoutes);
  await app.register(authRoutes);
  await app.register(secondFactorRoutes);
  await app.register(oauthProviderRoutes);
  await app.register(ldapSettingRoutes);
  await app.register(userRoutes);
  await app.register(roleRoutes);
  await app.register(apiKeyRoutes);
  await app.register(auditLogRoutes);
  await app.register(sessionRoutes);
  await app.register(clusterRoutes);
  await app.register(overviewRoutes);
  await app.register(prometheusRoutes);
  await app.register(kubeconfigRoutes);
  // Kite UI's resource templates and the user's sidebar preference (docs/tools.md).
  await app.register(templateRoutes);
  await app.register(preferenceRoutes);
  // Kite's image editor: an image's tags from its registry (docs/tools.md, "Image tags").
  await app.register(imageTagRoutes);
  // Kite's settings pages: general settings, the AI status (docs/tools.md, "Settings").
  await app.register(settingRoutes);
  // Its own body handling (none: bodies stream through) and Status errors, encapsulated.
  await app.register(k8sProxyRoutes, { prefix: '/k8s/clusters' });
  // Helm releases and charts (docs/helm.md): before the generic resource routes.
  await app.register(helmRoutes);
  // Kite's resource tools (events, apply, node actions, history, CRDs, version): fixed segments.
  await app.register(toolRoutes);
  // Running workloads: logs, the live pod list, pod and service proxies (docs/workloads.md).
  await app.register(logRoutes);
  await app.register(terminalRoutes);
  await app.register(podWatchRoutes);
  await app.register(podFileRoutes);
  await app.register(workloadProxyRoutes);
  // kubectl describe's text for an object (src/describe/): /api/v1/<resource>/<ns>/<name>/describe.
  await app.register(describeRoutes, { prefix: '/api/v1' });
  await app.register(relatedRoutes, { prefix: '/api/v1' });
  await app.register(searchRoutes);
  // AI agents: the Model Context Protocol endpoint, acting as the caller (docs/mcp.md).
  await app.register(mcpRoutes);
  // The replicas' internal hop to the clusters each holds (docs/fleet.md): signed, never a user's.
  await app.register(fleetHopRoutes, { prefix: '/internal/fleet' });
  // Last: /api/v1/<resource>/... matches only what no route above claims.
  await app.register(resourceRoutes, { prefix: '/api/v1' });
  // Kite's web UI when KITELINE_UI_DIR names a build: any other GET is its (docs/ui.md).
  await app.register(uiRoutes);
  return app;
}
