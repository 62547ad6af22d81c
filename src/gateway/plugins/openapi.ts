// The OpenAPI 3 document of the gateway, generated from the route schemas (@fastify/swagger in
// dynamic mode: it collects every route through onRoute, so this plugin is registered before the
// route modules), served at GET /openapi.json, and the Swagger UI page at /docs (its assets come
// from node_modules; /docs/json and /docs/yaml are the UI's own copies of the same document).
// Both are public: they describe the contract, not data. Everything under /docs is hidden from the
// document.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { PACKAGE_ROOT } from '../../config.js';
import { PUBLIC, ref, registerSharedSchemas, schemaOf, SECURITY_SCHEMES, SIGNED_IN } from '../schemas.js';

declare module 'fastify' {
  interface FastifySchema {
    /**
     * A request body that is documented but not validated by Fastify: the resource routes check
     * bodies themselves (JSON, YAML and patch documents) with messages a schema cannot give.
     */
    documentedBody?: object;
    /** Cookies a route reads (documented only; Fastify does not validate cookies). */
    cookies?: object;
  }
}

export const OPENAPI_PATH = '/openapi.json';
export const DOCS_PREFIX = '/docs';

const TAGS = [
  { name: 'health', description: 'Liveness and readiness' },
  { name: 'setup', description: 'First-run setup: the super user and the first clusters' },
  { name: 'auth', description: 'Sessions: password login, logout, the current user' },
  { name: 'users', description: 'User administration (role admin)' },
  { name: 'roles', description: 'Role administration and assignment (role admin)' },
  { name: 'apikeys', description: 'API key administration (role admin)' },
  { name: 'clusters', description: 'Cluster registration (role admin) and the cluster list' },
  { name: 'resources', description: 'Any resource of the selected cluster, proxied and authorized per role' },
  { name: 'helm', description: 'Helm releases (read natively, written through helm as you) and chart repositories' },
  { name: 'monitoring', description: "Kite's charts and PromQL on the selected cluster's Prometheus" },
  { name: 'operations', description: 'Metrics' },
  {
    name: 'sessions',
    description: 'Recorded terminal, exec and attach sessions: search and replay (admins, or a role naming sessions)',
  },
  { name: 'docs', description: 'This document' },
];

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version?: string };
  return pkg.version ?? '0.0.0';
}

export default fp(
  async function openapi(app: FastifyInstance) {
    registerSharedSchemas(app);
    await app.register(swagger, {
      openapi: {
        openapi: '3.0.3',
        info: {
          title: 'kiteline',
          version: packageVersion(),
          description:
            'Multi-cluster Kubernetes administration: the /api/v1 contract of Kite, ' +
            'served from custom resources in the host cluster. ' +
            'Every error answers {error, reason, code[, details]}.',
        },
        tags: TAGS,
        components: { securitySchemes: SECURITY_SCHEMES },
        security: SIGNED_IN,
      },
      // Shared schemas keep their $id as their name under components.schemas.
      refResolver: {
        buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
      },
      transform: ({ schema, url }) => {
        if (!schema?.documentedBody) return { schema, url };
        const { documentedBody, ...rest } = schema;
        return { schema: { ...rest, body: documentedBody }, url };
      },
    });
    await app.register(swaggerUi, { routePrefix: DOCS_PREFIX, uiConfig: { deepLinking: true } });

    app.get(
      OPENAPI_PATH,
      {
        schema: schemaOf('docs')('The OpenAPI 3 document of this API', {
          security: PUBLIC,
          response: { 200: ref('OpenAPIDocument') },
        }),
      },
      async () => app.swagger(),
    );
  },
  { name: 'kiteline-openapi' },
);
