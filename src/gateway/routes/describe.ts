// GET /api/v1/<resource>/<namespace|_all>/<name>/describe → {result}: the text `kubectl describe`
// prints for the object (Kite's route and answer), built by src/describe/ from the cluster's data.
// Authorization: `get` on the object's resource, checked by kiteline's roles and the host guard, and
// the object is read with the caller's impersonation. The related objects a describer reads (events,
// a Deployment's ReplicaSets, a controller's or a Node's pods, a Service's Endpoints, a Node's
// Lease, a Namespace's quotas) are read with kiteline's own connection, each only when the caller's
// roles allow that read too (src/describe/related.ts); docs/tools.md ("Describe") says what that
// reveals. Registered with prefix /api/v1, before the generic resource routes.
import type { FastifyInstance } from 'fastify';
import { describe } from '../../describe/describe.js';
import type { Json } from '../../describe/format.js';
import { RelatedReader } from '../../describe/related.js';
import { NotFoundError } from '../../errors.js';
import { requireAccess } from '../../resources/access.js';
import { ALL_NAMESPACES, checkSegments, NAME_PATTERN, NAMESPACE_PATTERN, RESOURCE_PATTERN } from '../../resources/segments.js';
import { objectPath, planTarget } from '../../resources/target.js';
import { getJson } from '../../tools/kube.js';
import { clusterCookie, clusterHeader, objectOf, replies } from '../schemas.js';
import { toolRequest, withClientSignal } from '../tool-request.js';

interface Params {
  resource: string;
  namespace: string;
  name: string;
}

export default async function describeRoutes(app: FastifyInstance) {
  const { auth, hostGuard } = app.services;

  app.get(
    '/:resource/:namespace/:name/describe',
    {
      onRequest: app.requireUser,
      schema: {
        tags: ['resources'],
        summary: 'The text kubectl describe prints for an object (namespace `_all` for cluster-scoped kinds)',
        headers: clusterHeader,
        cookies: clusterCookie,
        params: {
          type: 'object',
          required: ['resource', 'namespace', 'name'],
          properties: {
            resource: { type: 'string', maxLength: 253, pattern: RESOURCE_PATTERN, description: 'a plural resource name (`pods`) or `<plural>.<group>`' },
            namespace: { type: 'string', maxLength: 63, pattern: NAMESPACE_PATTERN, description: 'the namespace, or `_all` for a cluster-scoped kind' },
            name: { type: 'string', maxLength: 253, pattern: NAME_PATTERN },
          },
        },
        querystring: { type: 'object', properties: { 'x-cluster-name': { type: 'string' } } },
        response: replies({ 200: objectOf({ result: { type: 'string', description: 'the describe text, as kubectl prints it' } }) }),
      },
    },
    withClientSignal(async (request, reply, signal) => {
      const p = request.params as Params;
      const segments = checkSegments({ resource: p.resource, namespace: p.namespace, name: p.name });
      const ctx = await toolRequest(app, request, reply, signal);
      const { conn, principal } = ctx;
      const resolved = await conn.resolveResource(segments.resource);
      if (!resolved) throw new NotFoundError(`resource not found on cluster ${conn.name}: ${segments.resource}`);
      const target = planTarget(resolved, segments);
      requireAccess(auth, principal, conn.name, target.resource, target.namespace, 'get');
      await hostGuard.check(conn, { resolved, namespace: target.namespace, name: target.name, verb: 'get' });

      const object = await getJson<Json>(ctx, objectPath(resolved, target.namespace, target.name!));
      const related = new RelatedReader({
        conn,
        signal,
        allowed: (resource, namespace, verb) => auth.authorize(principal, { cluster: conn.name, namespace: namespace ?? ALL_NAMESPACES, resource, verb }),
        guard: (kind, namespace, name, verb) => hostGuard.check(conn, { resolved: kind, namespace, name, verb }),
        allNamespacesSelector: (kind, fieldSelector) => hostGuard.listFieldSelector(conn, kind, fieldSelector),
      });
      return { result: await describe(resolved.group, object, related) };
    }),
  );
}
