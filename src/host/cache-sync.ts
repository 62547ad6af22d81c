// Read-your-writes for this replica: after a write, wait (briefly) until the watch-backed cache
// shows it, so the next request served from the cache sees what the last answer said.
// Never fails: if the event is slow, it gives up after the timeout and the cache catches up later.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { WatchedCache } from './informer.js';

export function awaitCache<T extends KubernetesObject>(
  cache: WatchedCache<T>,
  name: string,
  namespace: string,
  done: (obj: T | undefined) => boolean,
  timeoutMs = 3000,
): Promise<void> {
  if (done(cache.get(name, namespace))) return Promise.resolve();
  return new Promise((resolve) => {
    let finished = false;
    const check = () => {
      if (finished || !done(cache.get(name, namespace))) return;
      finished = true;
      clearTimeout(timer);
      clearInterval(poll);
      resolve();
    };
    const timer = setTimeout(() => {
      finished = true;
      clearInterval(poll);
      resolve();
    }, timeoutMs);
    // WatchedCache has no "off": a short poll instead of listeners that would pile up.
    const poll = setInterval(check, 5);
    timer.unref();
  });
}

/** The cache holds exactly this version of the object (or a later one of the same object). */
export function hasVersion(written: KubernetesObject) {
  const rv = written.metadata?.resourceVersion;
  const uid = written.metadata?.uid;
  return (cached: KubernetesObject | undefined) =>
    cached !== undefined && cached.metadata?.uid === uid && (cached.metadata?.resourceVersion === rv || Number(cached.metadata?.resourceVersion) > Number(rv));
}

/** The cache no longer holds this object. */
export function isGone(uid: string | undefined) {
  return (cached: KubernetesObject | undefined) => cached === undefined || cached.metadata?.uid !== uid;
}
