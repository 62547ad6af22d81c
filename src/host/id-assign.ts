// Gives an object an integer id label when it has none (applied with kubectl) or when an older
// object already holds its id. The patch carries the resourceVersion the decision was made on, so
// when several replicas race only one patch lands (the others get 409 and their ids stay unused:
// ids are never reused, gaps are fine).
import type { KubernetesObject } from '@kubernetes/client-node';
import type { CustomResources } from './crud.js';
import type { IdAllocator, IdKind } from './ids.js';
import { isNotFound } from './host-errors.js';
import { ConflictError } from '../errors.js';
import { ID_LABEL, resourceId } from './resources.js';

export async function assignId<T extends KubernetesObject>(
  crs: CustomResources<T>,
  ids: IdAllocator,
  kind: IdKind,
  obj: T,
  floor: number,
): Promise<T | undefined> {
  const id = await ids.next(kind, floor);
  try {
    return await crs.patch(obj.metadata!.name!, {
      metadata: { resourceVersion: obj.metadata!.resourceVersion, labels: { [ID_LABEL]: String(id) } },
    });
  } catch (err) {
    // changed or gone meanwhile: look again later
    if (err instanceof ConflictError || isNotFound(err)) return undefined;
    throw err;
  }
}

/** The id of obj, assigning one now when it has none (used before issuing a session). */
export async function ensureId<T extends KubernetesObject>(
  crs: CustomResources<T>,
  ids: IdAllocator,
  kind: IdKind,
  obj: T,
  floor: number,
): Promise<number | undefined> {
  let current: T | undefined = obj;
  for (let attempt = 0; attempt < 5 && current; attempt++) {
    const id = resourceId(current);
    if (id !== undefined) return id;
    const patched = await assignId(crs, ids, kind, current, floor);
    if (patched) return resourceId(patched);
    try {
      current = await crs.read(obj.metadata!.name!);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }
  return current ? resourceId(current) : undefined;
}
