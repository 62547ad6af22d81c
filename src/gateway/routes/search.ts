// GET /api/v1/search?q=&limit=&namespace=: Kite's global search, `{results, total}` (plus
// `partial`), on the cluster the request names, from that cluster's search index (src/tools/
// search-index.ts: started by the first search, kept current by watches on kiteline's own
// connection, stopped when idle). The index holds what kiteline can see, so each result is one the
// caller may `list` (kind and namespace) by kiteline's roles; on a cluster registered with
// `impersonate` the cluster's own RBAC is not asked. docs/tools.md, "Search".
import { Type } from 'typebox';
import { DEFAULT_SEARCH_LIMIT, MAX_QUERY_LENGTH, MAX_SEARCH_LIMIT, searchAsCaller } from '../../tools/search.js';
import { clusterQueryProperties, clusterSchema, defaulted, objectOf, type App } from '../schemas.js';
import { toolRequest, withClientSignal } from '../tool-request.js';
import { OPTIONAL_NAMESPACE_PATTERN } from '../../cluster-access/segments.js';

const SearchQuery = Type.Object({
  q: Type.String({
    minLength: 1,
    maxLength: MAX_QUERY_LENGTH,
    description: 'a part of a name, a label value, `key=value`; may start with a kind (`pod web`)',
  }),
  limit: defaulted(Type.Integer({ minimum: 1, maximum: MAX_SEARCH_LIMIT, default: DEFAULT_SEARCH_LIMIT })),
  namespace: Type.Optional(
    Type.String({
      maxLength: 63,
      pattern: OPTIONAL_NAMESPACE_PATTERN,
      description: 'only objects of this namespace; empty or `_all`: every namespace',
    }),
  ),
  ...clusterQueryProperties,
});

const SearchAnswer = objectOf({
  results: Type.Array(
    objectOf({
      id: Type.String({ description: 'the object’s uid' }),
      name: Type.String(),
      namespace: Type.String({ description: 'absent for a cluster-scoped kind' }),
      resourceType: Type.String({ description: 'the plural resource name: `pods`, `deployments`, ...' }),
      createdAt: Type.String({ description: 'the object’s creationTimestamp (RFC 3339)' }),
    }),
  ),
  total: Type.Integer({ description: 'every match the caller may see (results holds at most `limit`)' }),
  partial: Type.Boolean({
    description:
      'the cluster’s index may be missing objects: still loading, a list or watch failing, or over its size limit',
  }),
});

export default async function searchRoutes(app: App) {
  const { services } = app;

  app.get(
    '/api/v1/search',
    {
      onRequest: app.requireUser,
      schema: clusterSchema(
        'Objects of the common kinds whose name contains the query or whose label matches it, that the caller may list',
        { querystring: SearchQuery, response: { 200: SearchAnswer } },
      ),
    },
    withClientSignal(async (request, reply, signal) => {
      const { query } = request;
      const ctx = await toolRequest(app, request, reply, signal);
      return searchAsCaller(services.searchIndexes, services.auth, ctx, {
        text: query.q,
        limit: query.limit,
        namespace: query.namespace,
      });
    }),
  );
}
