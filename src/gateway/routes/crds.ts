// Kite's CRD routes: GET /api/v1/crds (and /crds/_all) lists the cluster's
// CustomResourceDefinitions, GET /api/v1/crds/_all/<crd> reads one; both stream through from the
// cluster like the resource routes. Kite's UI then lists custom resources at /api/v1/<crd>/<ns>,
// which the resource routes serve through discovery. Authorized as `list` / `get` on
// customresourcedefinitions (the canonical name: a role naming "crds" grants nothing here).
import type { FastifyReply } from 'fastify';
import { Type, type Static } from 'typebox';
import { NotFoundError } from '../../errors.js';
import { requireAccess } from '../../cluster-access/access.js';
import { upstreamHeaders } from '../../cluster-access/impersonation.js';
import { withSearch } from '../../cluster-access/read-query.js';
import { NAME_PATTERN } from '../../cluster-access/segments.js';
import { collectionPath, objectPath } from '../../cluster-access/target.js';
import { expectSuccess, sendObject, streamToClient } from '../../cluster-access/upstream.js';
import { ClusterQuery, clusterQueryProperties, clusterSchema, ref, type App, type RequestWith } from '../schemas.js';
import { toolRequest, withClientSignal } from '../tool-request.js';

const CRDS = 'customresourcedefinitions.apiextensions.k8s.io';
const RESOURCE = 'customresourcedefinitions';

const CrdListQuery = Type.Object({
  labelSelector: Type.Optional(Type.String({ maxLength: 4096 })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 10000 })),
  continue: Type.Optional(Type.String({ maxLength: 4096 })),
  ...clusterQueryProperties,
});

const CrdParams = Type.Object({ crd: Type.String({ maxLength: 253, pattern: NAME_PATTERN }) });

export default async function crdRoutes(app: App) {
  async function list(
    request: RequestWith<{ query: Static<typeof CrdListQuery> }>,
    reply: FastifyReply,
    signal: AbortSignal,
  ) {
    const ctx = await toolRequest(app, request, reply, signal);
    requireAccess(app.services.auth, ctx.principal, ctx.conn.name, RESOURCE, undefined, 'list');
    const resolved = await ctx.conn.resolveResource(CRDS);
    if (!resolved) throw new NotFoundError(`cluster ${ctx.conn.name} serves no CustomResourceDefinitions`);
    const { query } = request;
    const search = new URLSearchParams();
    if (query.labelSelector) search.set('labelSelector', query.labelSelector);
    if (query.limit) search.set('limit', String(query.limit));
    if (query.continue) search.set('continue', query.continue);
    const res = await expectSuccess(
      await ctx.conn.request({
        method: 'GET',
        path: withSearch(collectionPath(resolved, undefined), search),
        headers: upstreamHeaders({ accept: 'application/json' }, ctx.headers),
        signal,
      }),
    );
    return streamToClient(reply, res);
  }

  const crdList = { querystring: CrdListQuery, response: { 200: ref('KubernetesObject') } };
  for (const path of ['/crds', '/crds/_all']) {
    const summary = `The cluster's CustomResourceDefinitions (Kite's ${path})`;
    app.get(
      `/api/v1${path}`,
      { onRequest: app.requireUser, schema: clusterSchema(summary, crdList) },
      withClientSignal(list),
    );
  }

  app.get(
    '/api/v1/crds/_all/:crd',
    {
      onRequest: app.requireUser,
      schema: clusterSchema('One CustomResourceDefinition by name (`<plural>.<group>`)', {
        params: CrdParams,
        querystring: ClusterQuery,
        response: { 200: ref('KubernetesObject') },
      }),
    },
    withClientSignal(async (request, reply, signal) => {
      const { crd } = request.params;
      const ctx = await toolRequest(app, request, reply, signal);
      requireAccess(app.services.auth, ctx.principal, ctx.conn.name, RESOURCE, undefined, 'get');
      const resolved = await ctx.conn.resolveResource(CRDS);
      if (!resolved) throw new NotFoundError(`cluster ${ctx.conn.name} serves no CustomResourceDefinitions`);
      await app.services.hostGuard.check(ctx.conn, { resolved, namespace: undefined, name: crd, verb: 'get' });
      const headers = upstreamHeaders({ accept: 'application/json' }, ctx.headers);
      return sendObject(
        reply,
        await ctx.conn.readObject({ path: objectPath(resolved, undefined, crd), headers, signal }),
      );
    }),
  );
}
