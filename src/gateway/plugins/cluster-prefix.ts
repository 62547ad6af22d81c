// Kite's newest spelling of a cluster route: the cluster in the path, /api/v1/_clusters/<cluster>/...,
// beside the old one (the x-cluster-name header, query parameter or cookie). Before routing, the
// URL loses the prefix and the request carries the path's cluster as its x-cluster-name header
// (replacing any the client sent: the path is the more specific choice), so every route, hook,
// guard and audit line sees one request shape. Only routes on a selected cluster are served this
// way (their schema declares the cluster header: schemas.ts clusterSchemaOf); any other route under
// the prefix (admin, auth, settings) is a 404, as are a malformed cluster segment and the bare prefix.
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { CLUSTER_SELECTOR } from '../../cluster-access/cluster-select.js';
import { NotFoundError } from '../../errors.js';
import { isClusterRoute } from '../schemas.js';

export const CLUSTER_PATH_PREFIX = '/api/v1/_clusters/';

/** Requests that came with the cluster in their path (their URL no longer shows it). */
const clusterInPath = new WeakSet<IncomingMessage>();

/** Fastify's rewriteUrl: /api/v1/_clusters/<cluster>/<rest> becomes /api/v1/<rest> on cluster <cluster>. */
export function rewriteClusterPath(req: IncomingMessage): string {
  const url = req.url ?? '/';
  if (!url.startsWith(CLUSTER_PATH_PREFIX)) return url;
  const rest = url.slice(CLUSTER_PATH_PREFIX.length);
  const end = rest.search(/[/?#]/);
  // No cluster segment, or nothing after it: left as is, which no route matches (404).
  if (end <= 0 || rest[end] !== '/') return url;
  let cluster: string;
  try {
    cluster = decodeURIComponent(rest.slice(0, end));
  } catch {
    return url;
  }
  req.headers[CLUSTER_SELECTOR] = cluster;
  clusterInPath.add(req);
  return `/api/v1${rest.slice(end)}`;
}

export default fp(
  async function clusterPrefix(app: FastifyInstance) {
    app.addHook('onRequest', (request, _reply, done) => {
      if (clusterInPath.has(request.raw)) {
        // The 404 handler's own request (no route) has no schema either: the same answer.
        if (!isClusterRoute(request.routeOptions.schema)) {
          done(new NotFoundError(`not a cluster route: ${request.url.split('?')[0].slice(0, 200)}`));
          return;
        }
      }
      done();
    });
  },
  { name: 'kiteline-cluster-prefix' },
);
