// GET /api/v1/<resource>/<namespace|_all>/<name>/related → [{type, name, namespace?, apiVersion}]:
// the objects related to one object (Kite's route and answer; src/tools/related.ts says which).
// Authorization: `get` on the object's resource (kiteline's roles, then the host guard), and the
// object is read with the caller's impersonation; the related objects are read with kiteline's own
// connection, each only when the caller's roles allow that read too, and an item is answered only
// when the caller may `get` or `list` its kind in its namespace (docs/tools.md, "Related objects").
// The object is read as the describe route reads it (readObjectView). Registered with prefix
// /api/v1, before the generic resource routes.
import { Type } from 'typebox';
import { RelatedFinder } from '../../tools/related.js';
import { clusterSchema, objectOf, type App } from '../schemas.js';
import { withClientSignal } from '../tool-request.js';
import { objectViewParts, readObjectView } from './describe.js';

const RelatedReply = Type.Array(
  objectOf({
    type: Type.String({ description: 'the plural resource name, from the cluster’s discovery' }),
    name: Type.String(),
    namespace: Type.String({ description: 'absent for a cluster-scoped kind' }),
    apiVersion: Type.String({ description: '`v1`, `apps/v1`, ...' }),
  }),
);

export default async function relatedRoutes(app: App) {
  app.get(
    '/:resource/:namespace/:name/related',
    {
      onRequest: app.requireUser,
      schema: clusterSchema(
        "An object's related objects: owners, owned objects, Services and Ingresses, " +
          'referenced ConfigMaps, Secrets, claims, ServiceAccount',
        { ...objectViewParts, response: { 200: RelatedReply } },
      ),
    },
    withClientSignal(async (request, reply, signal) => {
      const { ctx, resolved, object, related } = await readObjectView(app, request, reply, signal);
      return new RelatedFinder(ctx, related).find(resolved, object);
    }),
  );
}
