// Where the scrape-time gauges look: the Cluster objects (with this replica's connection health)
// and the host store's watch-backed caches.
import type { ClusterStore } from '../host/clusters.js';
import type { HostStore } from '../host/store.js';
import type { MetricsSources } from './metrics.js';

export function metricsSources(
  host: HostStore,
  clusters: ClusterStore,
  fleet: MetricsSources['fleet'],
): MetricsSources {
  return {
    fleet,
    clusters: () => clusters.views().map(({ name, ready, enabled, version }) => ({ name, ready, enabled, version })),
    cacheSizes: () => ({
      users: host.users.list().length,
      clusters: host.clusters.list().length,
      roles: host.roles.list().length,
      apikeys: host.apiKeys.list().length,
      secrets: host.secrets.list().length,
    }),
  };
}
