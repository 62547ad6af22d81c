// GET /api/v1/<resource>/<namespace|_all>/<name>/describe → {result}: the text `kubectl describe`
// prints for the object (Kite's route and answer), built by src/describe/ from the cluster's data.
// Authorization: `get` on the object's resource, checked by kiteline's roles and the host guard, and
// the object is read with the caller's impersonation. The related objects a describer reads (events,
// a Deployment's ReplicaSets, a controller's or a Node's pods, a Service's EndpointSlices, a Node's
// Lease, a Namespace's quotas) are read with kiteline's own connection, each only when the caller's
// roles allow that read too (src/describe/related.ts); docs/tools.md ("Describe") says what that
// reveals. readObjectView and objectViewParts serve the related-objects route too. Registered with
// prefix /api/v1, before the generic resource routes. The read itself is cluster-access/reads.ts's,
// which the MCP tools share.
import type { FastifyInstance, FastifyReply } from 'fastify';
import { Type, type Static } from 'typebox';
import type { ResolvedResource } from '../../clusters/types.js';
import { describe } from '../../describe/describe.js';
import type { Json } from '../../describe/format.js';
import { callerAccess, RelatedReader } from '../../describe/related.js';
import { readObject } from '../../cluster-access/reads.js';
import { NAME_PATTERN, NAMESPACE_PATTERN, RESOURCE_PATTERN } from '../../cluster-access/segments.js';
import { ClusterQuery, clusterSchema, objectOf, type App, type RequestWith } from '../schemas.js';
import { toolRequest, withClientSignal, type ToolRequest } from '../tool-request.js';

/** The path of a view of one object: /:resource/:namespace/:name/<view>. */
export const ObjectViewParams = Type.Object({
  resource: Type.String({
    maxLength: 253,
    pattern: RESOURCE_PATTERN,
    description: 'a plural resource name (`pods`) or `<plural>.<group>`',
  }),
  namespace: Type.String({
    maxLength: 63,
    pattern: NAMESPACE_PATTERN,
    description: 'the namespace, or `_all` for a cluster-scoped kind',
  }),
  name: Type.String({ maxLength: 253, pattern: NAME_PATTERN }),
});

/** The path and query of a GET /:resource/:namespace/:name/<view> route (describe, related). */
export const objectViewParts = { params: ObjectViewParams, querystring: ClusterQuery };

const DescribeReply = objectOf({ result: Type.String({ description: 'the describe text, as kubectl prints it' }) });

/**
 * What a view of one object starts from: the request's cluster, the object's kind, the object, a reader of its
 * related objects.
 */
export interface ObjectView {
  ctx: ToolRequest;
  resolved: ResolvedResource;
  object: Json;
  related: RelatedReader;
}

/**
 * The object a view route names, after `get` on it is authorized (kiteline's roles, the host
 * guard), read with the caller's impersonation; related objects are read for the caller.
 */
export async function readObjectView(
  app: FastifyInstance,
  request: RequestWith<{ params: Static<typeof ObjectViewParams> }>,
  reply: FastifyReply,
  signal: AbortSignal,
): Promise<ObjectView> {
  const { auth, hostGuard } = app.services;
  const ctx = await toolRequest(app, request, reply, signal);
  const { resolved, object } = await readObject(app.services, ctx, request.params);
  const related = new RelatedReader(callerAccess(auth, hostGuard, ctx.conn, ctx.principal, signal));
  return { ctx, resolved, object: object, related };
}

export default async function describeRoutes(app: App) {
  app.get(
    '/:resource/:namespace/:name/describe',
    {
      onRequest: app.requireUser,
      schema: clusterSchema(
        'The text kubectl describe prints for an object (namespace `_all` for cluster-scoped kinds)',
        { ...objectViewParts, response: { 200: DescribeReply } },
      ),
    },
    withClientSignal(async (request, reply, signal) => {
      const { resolved, object, related } = await readObjectView(app, request, reply, signal);
      return { result: await describe(resolved.group, object, related) };
    }),
  );
}
