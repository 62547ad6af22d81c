// Lookup indexes over a WatchedCache: by integer id and by a natural key (username, role name,
// key name), rebuilt lazily after any change event. When two objects claim one id or one key (a
// kubectl apply can do that), the OLDEST object wins and the other is not indexed.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { WatchedCache } from './informer.js';
import { resourceId } from './resources.js';

/** creationTimestamp as an ISO string (watch events carry strings, typed lists carry Dates). */
export function creationTime(obj: KubernetesObject): string {
  const value: unknown = obj.metadata?.creationTimestamp;
  return value instanceof Date ? value.toISOString() : typeof value === 'string' ? value : '';
}

/** Sort order "oldest first", ties broken by name so every replica agrees. */
export function oldestFirst(a: KubernetesObject, b: KubernetesObject): number {
  const ta = creationTime(a);
  const tb = creationTime(b);
  if (ta !== tb) return ta < tb ? -1 : 1;
  const na = a.metadata?.name ?? '';
  const nb = b.metadata?.name ?? '';
  return na === nb ? 0 : na < nb ? -1 : 1;
}

export class CacheIndex<T extends KubernetesObject> {
  private dirty = true;
  private idMap = new Map<number, T>();
  private keyMap = new Map<string, T>();
  private winners: T[] = [];

  constructor(
    private readonly cache: WatchedCache<T>,
    private readonly keyOf: (obj: T) => string | undefined,
  ) {
    const invalidate = () => {
      this.dirty = true;
    };
    cache.on('add', invalidate);
    cache.on('update', invalidate);
    cache.on('delete', invalidate);
  }

  private rebuild(): void {
    if (!this.dirty) return;
    this.dirty = false;
    const objects = [...this.cache.list()].sort(oldestFirst);
    const idMap = new Map<number, T>();
    const keyMap = new Map<string, T>();
    const winners: T[] = [];
    for (const obj of objects) {
      const id = resourceId(obj);
      const key = this.keyOf(obj);
      if (key === undefined || keyMap.has(key)) continue;
      keyMap.set(key, obj);
      if (id === undefined || idMap.has(id)) continue;
      idMap.set(id, obj);
      winners.push(obj);
    }
    this.idMap = idMap;
    this.keyMap = keyMap;
    this.winners = winners;
  }

  byId(id: number): T | undefined {
    this.rebuild();
    return this.idMap.get(id);
  }

  byKey(key: string): T | undefined {
    this.rebuild();
    return this.keyMap.get(key);
  }

  /** Objects that own both their key and their id: the ones the API shows. */
  all(): readonly T[] {
    this.rebuild();
    return this.winners;
  }

  /** The largest id in use (0 when none), so new ids never collide with labelled objects. */
  maxId(): number {
    let max = 0;
    for (const obj of this.cache.list()) max = Math.max(max, resourceId(obj) ?? 0);
    return max;
  }

  /** Objects that need an id: no valid id label, or an id an older object already holds. */
  needingIds(): T[] {
    const seen = new Set<number>();
    const out: T[] = [];
    const objects = [...this.cache.list()].sort(oldestFirst);
    for (const obj of objects) {
      if (obj.metadata?.deletionTimestamp) continue;
      const id = resourceId(obj);
      if (id === undefined || seen.has(id)) out.push(obj);
      else seen.add(id);
    }
    return out;
  }
}
