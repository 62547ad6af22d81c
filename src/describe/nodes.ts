// kubectl describe for Nodes (conditions, addresses, capacity, the non-terminated pods on the
// node and what they request, the node's Lease) and Namespaces (with their conditions, resource
// quotas and limit ranges).
import { describeEvents } from './events.js';
import {
  arr,
  byteOrder,
  obj,
  printAnnotationsMultiline,
  printLabelsMultiline,
  printTaintsMultiline,
  rfc1123z,
  since,
  str,
  type Json,
} from './format.js';
import { Quantity } from '../cluster-access/quantity.js';
import { podRequestsAndLimits, resourceList, type ResourceList } from './quantity.js';
import { tabbed, type DescribeWriter } from './text.js';

const ROLE_PREFIX = 'node-role.kubernetes.io/';

/** kubectl's findNodeRoles. */
function nodeRoles(node: Json): string[] {
  const roles = new Set<string>();
  for (const [k, v] of Object.entries(obj(node.metadata?.labels))) {
    if (k.startsWith(ROLE_PREFIX)) {
      const role = k.slice(ROLE_PREFIX.length);
      if (role) roles.add(role);
    } else if (k === 'kubernetes.io/role' && str(v) !== '') {
      roles.add(str(v));
    }
  }
  return [...roles].sort(byteOrder);
}

/** The Lease of the node, or the error reading it. */
export type LeaseResult = { lease: Json } | { error: string };

/** The pods on the node, or undefined when the caller may not list them. */
export function describeNode(node: Json, pods: Json[] | undefined, lease: LeaseResult, events: Json[]): string {
  return tabbed((w) => {
    const meta = obj(node.metadata);
    const spec = obj(node.spec);
    const status = obj(node.status);
    w.write(0, `Name:\t${str(meta.name)}\n`);
    const roles = nodeRoles(node);
    w.write(0, `Roles:\t${roles.length > 0 ? roles.join(',') : '<none>'}\n`);
    printLabelsMultiline(w, 'Labels', meta.labels);
    printAnnotationsMultiline(w, 'Annotations', meta.annotations);
    w.write(0, `CreationTimestamp:\t${rfc1123z(meta.creationTimestamp)}\n`);
    printTaintsMultiline(w, 'Taints', spec.taints);
    w.write(0, `Unschedulable:\t${spec.unschedulable === true}\n`);
    if ('lease' in lease) {
      const ls = obj(lease.lease.spec);
      w.write(0, 'Lease:\n');
      const holder = ls.holderIdentity === undefined || ls.holderIdentity === null ? '<unset>' : str(ls.holderIdentity);
      w.write(1, `HolderIdentity:\t${holder}\n`);
      w.write(1, `AcquireTime:\t${ls.acquireTime ? rfc1123z(ls.acquireTime) : '<unset>'}\n`);
      w.write(1, `RenewTime:\t${ls.renewTime ? rfc1123z(ls.renewTime) : '<unset>'}\n`);
    } else {
      w.write(0, `Lease:\tFailed to get lease: ${lease.error}\n`);
    }
    const conditions = arr(status.conditions);
    if (conditions.length > 0) {
      w.write(0, 'Conditions:\n  Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\tReason\tMessage\n');
      w.write(1, '----\t------\t-----------------\t------------------\t------\t-------\n');
      for (const c of conditions) {
        const times = `${rfc1123z(c.lastHeartbeatTime)} \t${rfc1123z(c.lastTransitionTime)}`;
        w.write(1, `${str(c.type)} \t${str(c.status)} \t${times} \t${str(c.reason)} \t${str(c.message)}\n`);
      }
    }
    w.write(0, 'Addresses:\n');
    for (const a of arr(status.addresses)) w.write(1, `${str(a.type)}:\t${str(a.address)}\n`);
    const printResources = (list: ResourceList) => {
      for (const name of [...list.keys()].sort(byteOrder)) w.write(0, `  ${name}:\t${list.get(name)!.toString()}\n`);
    };
    const capacity = resourceList(status.capacity);
    const allocatableList = resourceList(status.allocatable);
    if (capacity.size > 0) {
      w.write(0, 'Capacity:\n');
      printResources(capacity);
    }
    if (allocatableList.size > 0) {
      w.write(0, 'Allocatable:\n');
      printResources(allocatableList);
    }
    const info = obj(status.nodeInfo);
    w.write(0, 'System Info:\n');
    w.write(0, `  Machine ID:\t${str(info.machineID)}\n`);
    w.write(0, `  System UUID:\t${str(info.systemUUID)}\n`);
    w.write(0, `  Boot ID:\t${str(info.bootID)}\n`);
    w.write(0, `  Kernel Version:\t${str(info.kernelVersion)}\n`);
    w.write(0, `  OS Image:\t${str(info.osImage)}\n`);
    w.write(0, `  Operating System:\t${str(info.operatingSystem)}\n`);
    w.write(0, `  Architecture:\t${str(info.architecture)}\n`);
    w.write(0, `  Container Runtime Version:\t${str(info.containerRuntimeVersion)}\n`);
    w.write(0, `  Kubelet Version:\t${str(info.kubeletVersion)}\n`);
    w.write(0, `  Kube-Proxy Version:\t${str(info.kubeProxyVersion)}\n`);
    if (str(spec.podCIDR)) w.write(0, `PodCIDR:\t${str(spec.podCIDR)}\n`);
    if (arr(spec.podCIDRs).length > 0) w.write(0, `PodCIDRs:\t${(spec.podCIDRs as unknown[]).map(str).join(',')}\n`);
    if (str(spec.providerID)) w.write(0, `ProviderID:\t${str(spec.providerID)}\n`);
    if (pods) describeNodeResource(w, pods, allocatableList.size > 0 ? allocatableList : capacity);
    else w.write(0, 'Pods:\tnot authorized\n');
    describeEvents(w, events);
  });
}

/** Go's int64(float64) of a percentage (truncated; a division by zero as amd64 converts it). */
function percent(part: number, whole: number): string {
  const f = (part / whole) * 100;
  if (!Number.isFinite(f)) return '-9223372036854775808';
  return String(Math.trunc(f));
}

const isHugePages = (name: string) => name.startsWith('hugepages-');
const STANDARD = new Set(['cpu', 'memory', 'ephemeral-storage']);

function describeNodeResource(w: DescribeWriter, pods: Json[], allocatable: ResourceList): void {
  const zero = Quantity.zero();
  const cpuAlloc = allocatable.get('cpu') ?? zero;
  const memAlloc = allocatable.get('memory') ?? Quantity.zero('BinarySI');
  const storageAlloc = allocatable.get('ephemeral-storage') ?? Quantity.zero('BinarySI');
  w.write(0, `Non-terminated Pods:\t(${pods.length} in total)\n`);
  w.write(1, 'Namespace\tName\t\tCPU Requests\tCPU Limits\tMemory Requests\tMemory Limits\tAge\n');
  w.write(1, '---------\t----\t\t------------\t----------\t---------------\t-------------\t---\n');
  const totalRequests: ResourceList = new Map();
  const totalLimits: ResourceList = new Map();
  for (const pod of pods) {
    const { requests, limits } = podRequestsAndLimits(pod);
    for (const [name, q] of requests) totalRequests.set(name, totalRequests.get(name)?.add(q) ?? q);
    for (const [name, q] of limits) totalLimits.set(name, totalLimits.get(name)?.add(q) ?? q);
    const cpuReq = requests.get('cpu') ?? zero;
    const cpuLim = limits.get('cpu') ?? zero;
    const memReq = requests.get('memory') ?? zero;
    const memLim = limits.get('memory') ?? zero;
    const cpu = (q: Quantity) => `${q} (${percent(q.milliValue(), cpuAlloc.milliValue())}%)`;
    const memory = (q: Quantity) => `${q} (${percent(q.value(), memAlloc.value())}%)`;
    const name = `${str(pod.metadata?.namespace)}\t${str(pod.metadata?.name)}`;
    const age = since(pod.metadata?.creationTimestamp);
    w.write(1, `${name}\t\t${cpu(cpuReq)}\t${cpu(cpuLim)}\t${memory(memReq)}\t${memory(memLim)}\t${age}\n`);
  }
  w.write(0, 'Allocated resources:\n  (Total limits may be over 100 percent, i.e., overcommitted.)\n');
  w.write(1, 'Resource\tRequests\tLimits\n');
  w.write(1, '--------\t--------\t------\n');
  const share = (q: Quantity, whole: number, milli: boolean) =>
    whole !== 0 ? Math.trunc(((milli ? q.milliValue() : q.value()) / whole) * 100) : 0;
  const row = (name: string, whole: Quantity, milli: boolean) => {
    const req = totalRequests.get(name) ?? zero;
    const lim = totalLimits.get(name) ?? zero;
    const wholeValue = milli ? whole.milliValue() : whole.value();
    w.write(1, `${name}\t${req} (${share(req, wholeValue, milli)}%)\t${lim} (${share(lim, wholeValue, milli)}%)\n`);
  };
  row('cpu', cpuAlloc, true);
  row('memory', memAlloc, false);
  row('ephemeral-storage', storageAlloc, false);
  const names = [...allocatable.keys()];
  for (const name of names.filter(isHugePages).sort(byteOrder)) row(name, allocatable.get(name)!, false);
  for (const name of names.filter((n) => !isHugePages(n) && !STANDARD.has(n) && n !== 'pods').sort(byteOrder)) {
    w.write(1, `${name}\t${totalRequests.get(name) ?? zero}\t${totalLimits.get(name) ?? zero}\n`);
  }
}

// ---- Namespace ------------------------------------------------------------------------------

const SCOPE_HELP: Record<string, string> = {
  Terminating:
    'Matches all pods that have an active deadline. ' +
    'These pods have a limited lifespan on a node before being actively terminated by the system.',
  NotTerminating:
    'Matches all pods that do not have an active deadline. ' +
    'These pods usually include long running pods whose container command is not expected to terminate.',
  BestEffort:
    'Matches all pods that do not have resource requirements set. These pods have a best effort quality of service.',
  NotBestEffort:
    'Matches all pods that have at least one resource requirement set. ' +
    'These pods have a burstable or guaranteed quality of service.',
};

function describeResourceQuotas(w: DescribeWriter, quotas: Json[]): void {
  if (quotas.length === 0) {
    w.write(0, 'No resource quota.\n');
    return;
  }
  w.write(0, 'Resource Quotas\n');
  for (const q of [...quotas].sort((a, b) => byteOrder(str(a.metadata?.name), str(b.metadata?.name)))) {
    w.write(1, `Name:\t${str(q.metadata?.name)}\n`);
    const scopes = arr(q.spec?.scopes).map(str).sort(byteOrder);
    if (scopes.length > 0) {
      w.write(1, `Scopes:\t${scopes.join(', ')}\n`);
      for (const scope of scopes) if (SCOPE_HELP[scope]) w.write(1, `* ${SCOPE_HELP[scope]}\n`);
    }
    w.write(1, 'Resource\tUsed\tHard\n');
    w.write(1, '--------\t---\t---\n');
    const hard = resourceList(q.status?.hard);
    const used = resourceList(q.status?.used);
    for (const name of [...hard.keys()].sort(byteOrder))
      w.write(1, `${name}\t${used.get(name) ?? Quantity.zero()}\t${hard.get(name)}\n`);
  }
}

function describeLimitRanges(w: DescribeWriter, limitRanges: Json[]): void {
  if (limitRanges.length === 0) {
    w.write(0, 'No LimitRange resource.\n');
    return;
  }
  w.write(0, 'Resource Limits\n Type\tResource\tMin\tMax\tDefault Request\tDefault Limit\tMax Limit/Request Ratio\n');
  w.write(0, ' ----\t--------\t---\t---\t---------------\t-------------\t-----------------------\n');
  for (const lr of limitRanges) {
    for (const item of arr(lr.spec?.limits)) {
      const lists = [item.min, item.max, item.defaultRequest, item.default, item.maxLimitRequestRatio].map(
        resourceList,
      );
      const names = new Set(lists.flatMap((l) => [...l.keys()]));
      for (const name of names) {
        const values = lists.map((l) => (l.has(name) ? l.get(name)!.toString() : '-'));
        w.write(0, ` ${str(item.type)}\t${name}\t${values.join('\t')}\n`);
      }
    }
  }
}

/** `quotas` / `limitRanges` undefined: the cluster does not serve them (the section is left out). */
export function describeNamespace(
  namespace: Json,
  quotas: Json[] | undefined,
  limitRanges: Json[] | undefined,
): string {
  return tabbed((w) => {
    const meta = obj(namespace.metadata);
    w.write(0, `Name:\t${str(meta.name)}\n`);
    printLabelsMultiline(w, 'Labels', meta.labels);
    printAnnotationsMultiline(w, 'Annotations', meta.annotations);
    w.write(0, `Status:\t${str(namespace.status?.phase)}\n`);
    const conditions = arr(namespace.status?.conditions);
    if (conditions.length > 0) {
      w.write(0, 'Conditions:\n');
      w.write(1, 'Type\tStatus\tLastTransitionTime\tReason\tMessage\n');
      w.write(1, '----\t------\t------------------\t------\t-------\n');
      for (const c of conditions) {
        const time = rfc1123z(c.lastTransitionTime);
        w.write(1, `${str(c.type)}\t${str(c.status)}\t${time}\t${str(c.reason)}\t${str(c.message)}\n`);
      }
    }
    if (quotas) {
      w.write(0, '\n');
      describeResourceQuotas(w, quotas);
    }
    if (limitRanges) {
      w.write(0, '\n');
      describeLimitRanges(w, limitRanges);
    }
  });
}
