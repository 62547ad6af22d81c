// GET /api/v1/overview: the counts on Kite's home page for the selected cluster. The caller must
// be allowed to list nodes, pods, namespaces and services across all namespaces (403 otherwise).
import { requireAccess } from '../../cluster-access/access.js';
import { holdClusterSlot } from '../../resources/cluster-slot.js';
import { impersonationHeaders } from '../../cluster-access/impersonation.js';
import { loadOverview, OVERVIEW_RESOURCES } from '../../resources/overview.js';
import { clientClosed } from '../../cluster-access/upstream.js';
import { clusterSchema, ClusterQuery, ref, type App } from '../schemas.js';
import { callerCluster } from '../tool-request.js';

export default async function overviewRoutes(app: App) {
  app.get(
    '/api/v1/overview',
    {
      onRequest: app.requireUser,
      schema: clusterSchema('Node, pod, namespace and service counts of the selected cluster', {
        description: 'The caller must be allowed to list nodes, pods, namespaces and services in all namespaces.',
        querystring: ClusterQuery,
        response: { 200: ref('Overview') },
      }),
    },
    async (request, reply) => {
      const { principal, conn } = await callerCluster(app, request);
      holdClusterSlot(reply, conn, principal, false);
      for (const resource of OVERVIEW_RESOURCES)
        requireAccess(app.services.auth, principal, conn.name, resource, undefined, 'list');
      const controller = new AbortController();
      reply.raw.once('close', () => {
        if (!reply.raw.writableFinished) controller.abort();
      });
      try {
        return await loadOverview(conn, impersonationHeaders(conn, principal), controller.signal);
      } catch (err) {
        if (controller.signal.aborted) throw clientClosed();
        throw err;
      }
    },
  );
}
