// Where the scrape-time gauges look: the Cluster objects (with this replica's connection health)
// and the host store's watch-backed caches.
import type { ClusterManager } from '../clusters/manager.js';
import type { HostStore } from '../host/store.js';
import type { MetricsSources } from './metrics.js';

export function metricsSources(host: HostStore, clusters: ClusterManager): MetricsSources {
  return {
    clusters: () =>
      clusters.listResources().map((cr) => {
        const view = clusters.view(cr);
        return { name: view.name, ready: view.ready, enabled: view.enabled, version: view.version };
      }),
    cacheSizes: () => ({
      users: host.users.list().length,
      clusters: host.clusters.list().length,
      roles: host.roles.list().length,
      apikeys: host.apiKeys.list().length,
      secrets: host.secrets.list().length,
    }),
  };
}
