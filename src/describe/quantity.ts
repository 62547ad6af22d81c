// Resource lists as kubectl's describers compute with them: sums and maxima of quantities
// (cluster-access/quantity.ts), and a pod's requests and limits as kubectl counts them.
import { Quantity } from '../cluster-access/quantity.js';
import { arr, obj, str, type Json } from './format.js';

/** A resource list (name → quantity) as Quantities. */
export type ResourceList = Map<string, Quantity>;

export function resourceList(value: unknown): ResourceList {
  const list: ResourceList = new Map();
  if (value && typeof value === 'object') {
    for (const [name, q] of Object.entries(value as Record<string, unknown>)) list.set(name, Quantity.parse(q));
  }
  return list;
}

function addInto(target: ResourceList, add: ResourceList): void {
  for (const [name, q] of add) {
    const known = target.get(name);
    target.set(name, known ? known.add(q) : q);
  }
}

function maxInto(target: ResourceList, other: ResourceList): void {
  for (const [name, q] of other) {
    const known = target.get(name);
    if (!known || q.cmp(known) > 0) target.set(name, q);
  }
}

function sumOf(...lists: ResourceList[]): ResourceList {
  const sum: ResourceList = new Map();
  for (const list of lists) addInto(sum, list);
  return sum;
}

function maxOf(...lists: ResourceList[]): ResourceList {
  const max: ResourceList = new Map();
  for (const list of lists) maxInto(max, list);
  return max;
}

const isRestartable = (container: Json) => container.restartPolicy === 'Always';

/**
 * A container's requests as the kubelet holds them: after an in-place resize, the larger of the spec's,
 * the status's and the allocated ones (the spec's left out when the resize is infeasible).
 */
function containerRequests(pod: Json, container: Json, statuses: Map<string, Json>): ResourceList {
  const specRequests = resourceList(container.resources?.requests);
  const status = statuses.get(str(container.name));
  if (!status?.resources) return specRequests;
  const conditions = arr(pod.status?.conditions);
  const pending = conditions.find((c) => c.type === 'PodResizePending');
  const infeasible = pending?.reason === 'Infeasible';
  const statusRequests = resourceList(status.resources.requests);
  const allocated = resourceList(status.allocatedResources);
  return infeasible ? maxOf(statusRequests, allocated) : maxOf(specRequests, statusRequests, allocated);
}

/**
 * kubectl's resourcehelper.PodRequestsAndLimits: containers and sidecars (restartable init containers)
 * summed; each other init container with the sidecars started before it, the largest of them as a
 * minimum; plus the pod's overhead (on limits only where a limit is set).
 */
export function podRequestsAndLimits(pod: Json): {
  requests: ResourceList;
  limits: ResourceList;
} {
  const spec = obj(pod.spec);
  const containers = arr(spec.containers);
  const initContainers = arr(spec.initContainers);
  const statuses = new Map<string, Json>();
  for (const list of [pod.status?.containerStatuses, pod.status?.initContainerStatuses])
    for (const status of arr(list)) statuses.set(str(status.name), status);

  const total = (of: (container: Json) => ResourceList): ResourceList => {
    const sum = sumOf(...containers.map(of));
    const sidecars: ResourceList = new Map();
    const initMax: ResourceList = new Map();
    for (const container of initContainers) {
      const own = of(container);
      if (isRestartable(container)) {
        addInto(sum, own);
        addInto(sidecars, own);
        maxInto(initMax, sidecars);
      } else {
        maxInto(initMax, sumOf(own, sidecars));
      }
    }
    maxInto(sum, initMax);
    return sum;
  };
  const requests = total((c) => containerRequests(pod, c, statuses));
  const limits = total((c) => resourceList(c.resources?.limits));
  if (spec.overhead && typeof spec.overhead === 'object') {
    const overhead = resourceList(spec.overhead);
    addInto(requests, overhead);
    for (const [name, q] of overhead) {
      const known = limits.get(name);
      if (known && !known.isZero()) limits.set(name, known.add(q));
    }
  }
  return { requests, limits };
}
