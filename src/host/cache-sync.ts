// Read-your-writes for this replica: a store's write returns once the watch-backed cache shows
// it (WatchedCache.waitFor, woken by the watch event), so the next request served from the cache
// sees what the last answer said. These are the two conditions stores wait for.
import type { KubernetesObject } from '@kubernetes/client-node';

/** The cache holds exactly this version of the object (or a later one of the same object). */
export function hasVersion(written: KubernetesObject) {
  const rv = written.metadata?.resourceVersion;
  const uid = written.metadata?.uid;
  return (cached: KubernetesObject | undefined) =>
    cached !== undefined &&
    cached.metadata?.uid === uid &&
    (cached.metadata?.resourceVersion === rv || Number(cached.metadata?.resourceVersion) > Number(rv));
}

/** The cache no longer holds this object. */
export function isGone(uid: string | undefined) {
  return (cached: KubernetesObject | undefined) => cached === undefined || cached.metadata?.uid !== uid;
}
