// kubectl describe for the apps workloads: Deployments (with their old and new ReplicaSets),
// ReplicaSets, StatefulSets (with their volume claim templates) and DaemonSets, each with the
// status of the pods it controls.
import { describeEvents } from './events.js';
import {
  arr,
  byteOrder,
  controllerOf,
  formatLabels,
  formatLabelSelector,
  goList,
  goValue,
  obj,
  printAnnotationsMultiline,
  printLabelsMultiline,
  rfc1123z,
  selectorString,
  str,
  type Json,
} from './format.js';
import { describePodTemplate } from './pods.js';
import { Quantity } from '../cluster-access/quantity.js';
import { tabbed, type DescribeWriter } from './text.js';

/** The pods a controller owns, by phase (kubectl's getPodStatusForController). */
export interface PodCounts {
  running: number;
  waiting: number;
  succeeded: number;
  failed: number;
}

/** Counts the pods (listed with the controller's selector) whose controller is the object's UID. */
export function countPods(pods: Json[], uid: string): PodCounts {
  const counts: PodCounts = { running: 0, waiting: 0, succeeded: 0, failed: 0 };
  for (const pod of pods) {
    const owner = arr(pod.metadata?.ownerReferences).find((r) => r.controller === true);
    if (!owner || owner.uid !== uid) continue;
    switch (pod.status?.phase) {
      case 'Running':
        counts.running++;
        break;
      case 'Pending':
        counts.waiting++;
        break;
      case 'Succeeded':
        counts.succeeded++;
        break;
      case 'Failed':
        counts.failed++;
        break;
    }
  }
  return counts;
}

const podsStatus = (c: PodCounts) =>
  `${c.running} Running / ${c.waiting} Waiting / ${c.succeeded} Succeeded / ${c.failed} Failed`;
const int = (value: unknown) => goValue(value ?? 0);

/** The "Type Status Reason" conditions table of Deployments and ReplicaSets. */
function describeConditions(w: DescribeWriter, conditions: Json[]): void {
  if (conditions.length === 0) return;
  w.write(0, 'Conditions:\n  Type\tStatus\tReason\n');
  w.write(1, '----\t------\t------\n');
  for (const c of conditions) w.write(1, `${str(c.type)} \t${str(c.status)}\t${str(c.reason)}\n`);
}

// ---- Deployment -----------------------------------------------------------------------------

/** A JSON value with empty arrays and objects dropped and keys sorted (Semantic.DeepEqual's view). */
function normalized(value: unknown): unknown {
  if (Array.isArray(value)) return value.length === 0 ? undefined : value.map(normalized);
  if (value && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort(byteOrder)
      .map((k) => [k, normalized((value as Json)[k])] as const)
      .filter(([, v]) => v !== undefined);
    return entries.length === 0 ? undefined : Object.fromEntries(entries);
  }
  return value;
}

/** The template without the pod-template-hash label, for comparison (equalIgnoreHash). */
function templateKey(template: unknown): string {
  const t = JSON.parse(JSON.stringify(template ?? {})) as Json;
  if (t.metadata?.labels) delete t.metadata.labels['pod-template-hash'];
  return JSON.stringify(normalized(t)) ?? '';
}

function byCreation(a: Json, b: Json): number {
  const ta = Date.parse(str(a.metadata?.creationTimestamp)) || 0;
  const tb = Date.parse(str(b.metadata?.creationTimestamp)) || 0;
  if (ta !== tb) return ta - tb;
  return byteOrder(str(a.metadata?.name), str(b.metadata?.name));
}

/**
 * deploymentutil.GetAllReplicaSetsInChunks as kubectl's describer uses it: the new ReplicaSet (the
 * oldest one with the Deployment's template) and every other one the Deployment controls, scaled
 * down or not.
 */
export function splitReplicaSets(deployment: Json, replicaSets: Json[]): { old: Json[]; current: Json | undefined } {
  const uid = str(deployment.metadata?.uid);
  const owned = replicaSets
    .filter((rs) => arr(rs.metadata?.ownerReferences).some((r) => r.controller === true && r.uid === uid))
    .sort(byCreation);
  const wanted = templateKey(deployment.spec?.template);
  const current = owned.find((rs) => templateKey(rs.spec?.template) === wanted);
  const old = owned.filter((rs) => rs !== current);
  return { old, current };
}

function replicaSetsByLabels(list: Json[]): string {
  const text = list
    .map((rs) => `${str(rs.metadata?.name)} (${int(rs.status?.replicas)}/${int(rs.spec?.replicas)} replicas created)`)
    .join(', ');
  return text || '<none>';
}

/** `replicaSets`: none when they could not be listed (kubectl then leaves both lines out, as when there are none). */
export function describeDeployment(d: Json, replicaSets: Json[], events: Json[]): string {
  return tabbed((w) => {
    const meta = obj(d.metadata);
    const spec = obj(d.spec);
    const status = obj(d.status);
    w.write(0, `Name:\t${str(meta.name)}\n`);
    w.write(0, `Namespace:\t${str(meta.namespace)}\n`);
    w.write(0, `CreationTimestamp:\t${rfc1123z(meta.creationTimestamp)}\n`);
    printLabelsMultiline(w, 'Labels', meta.labels);
    printAnnotationsMultiline(w, 'Annotations', meta.annotations);
    w.write(0, `Selector:\t${selectorString(spec.selector)}\n`);
    w.write(
      0,
      `Replicas:\t${int(spec.replicas)} desired | ${int(status.updatedReplicas)} updated | ` +
        `${int(status.replicas)} total | ${int(status.availableReplicas)} available | ` +
        `${int(status.unavailableReplicas)} unavailable\n`,
    );
    w.write(0, `StrategyType:\t${str(spec.strategy?.type)}\n`);
    w.write(0, `MinReadySeconds:\t${int(spec.minReadySeconds)}\n`);
    const ru = spec.strategy?.rollingUpdate;
    if (ru) {
      const [maxUnavailable, maxSurge] = [goValue(ru.maxUnavailable), goValue(ru.maxSurge)];
      w.write(0, `RollingUpdateStrategy:\t${maxUnavailable} max unavailable, ${maxSurge} max surge\n`);
    }
    describePodTemplate(w, obj(spec.template));
    describeConditions(w, arr(status.conditions));
    const { old, current } = splitReplicaSets(d, replicaSets);
    if (old.length > 0 || current) {
      w.write(0, `OldReplicaSets:\t${replicaSetsByLabels(old)}\n`);
      w.write(0, `NewReplicaSet:\t${replicaSetsByLabels(current ? [current] : [])}\n`);
    }
    describeEvents(w, events);
  });
}

// ---- ReplicaSet, StatefulSet, DaemonSet -----------------------------------------------------

/** `pods` is the counts, or the error message when the pods could not be listed. */
export function describeReplicaSet(rs: Json, pods: PodCounts | string, events: Json[]): string {
  return tabbed((w) => {
    const meta = obj(rs.metadata);
    w.write(0, `Name:\t${str(meta.name)}\n`);
    w.write(0, `Namespace:\t${str(meta.namespace)}\n`);
    w.write(0, `Selector:\t${formatLabelSelector(rs.spec?.selector)}\n`);
    printLabelsMultiline(w, 'Labels', meta.labels);
    printAnnotationsMultiline(w, 'Annotations', meta.annotations);
    const controlledBy = controllerOf(rs);
    if (controlledBy) w.write(0, `Controlled By:\t${controlledBy}\n`);
    w.write(0, `Replicas:\t${int(rs.status?.replicas)} current / ${int(rs.spec?.replicas)} desired\n`);
    w.write(0, 'Pods Status:\t');
    if (typeof pods === 'string') w.write(0, `error in fetching pods: ${pods}\n`);
    else w.write(0, `${podsStatus(pods)}\n`);
    describePodTemplate(w, obj(rs.spec?.template));
    describeConditions(w, arr(rs.status?.conditions));
    describeEvents(w, events);
  });
}

function describeVolumeClaimTemplates(w: DescribeWriter, templates: Json[]): void {
  if (templates.length === 0) {
    w.write(0, 'Volume Claims:\t<none>\n');
    return;
  }
  w.write(0, 'Volume Claims:\n');
  for (const pvc of templates) {
    const meta = obj(pvc.metadata);
    const annotations = obj(meta.annotations);
    const storageClass =
      'volume.beta.kubernetes.io/storage-class' in annotations
        ? str(annotations['volume.beta.kubernetes.io/storage-class'])
        : str(pvc.spec?.storageClassName);
    w.write(1, `Name:\t${str(meta.name)}\n`);
    w.write(1, `StorageClass:\t${storageClass}\n`);
    printLabelsMultiline(w, 'Labels', meta.labels, '  ', '\t');
    printLabelsMultiline(w, 'Annotations', meta.annotations, '  ', '\t');
    const requests = obj(pvc.spec?.resources?.requests);
    w.write(1, `Capacity:\t${'storage' in requests ? Quantity.parse(requests.storage).toString() : '<default>'}\n`);
    w.write(1, `Access Modes:\t${goList(pvc.spec?.accessModes)}\n`);
  }
}

export function describeStatefulSet(ps: Json, pods: PodCounts, events: Json[]): string {
  return tabbed((w) => {
    const meta = obj(ps.metadata);
    const spec = obj(ps.spec);
    w.write(0, `Name:\t${str(meta.name)}\n`);
    w.write(0, `Namespace:\t${str(meta.namespace)}\n`);
    w.write(0, `CreationTimestamp:\t${rfc1123z(meta.creationTimestamp)}\n`);
    w.write(0, `Selector:\t${selectorString(spec.selector)}\n`);
    printLabelsMultiline(w, 'Labels', meta.labels);
    printAnnotationsMultiline(w, 'Annotations', meta.annotations);
    w.write(0, `Replicas:\t${int(spec.replicas)} desired | ${int(ps.status?.replicas)} total\n`);
    w.write(0, `Update Strategy:\t${str(spec.updateStrategy?.type)}\n`);
    const ru = obj(spec.updateStrategy?.rollingUpdate);
    if (ru.partition !== undefined && ru.partition !== null) {
      w.write(1, `Partition:\t${goValue(ru.partition)}\n`);
      if (ru.maxUnavailable !== undefined && ru.maxUnavailable !== null)
        w.write(1, `MaxUnavailable:\t${goValue(ru.maxUnavailable)}\n`);
    }
    w.write(0, `Pods Status:\t${podsStatus(pods)}\n`);
    describePodTemplate(w, obj(spec.template));
    describeVolumeClaimTemplates(w, arr(spec.volumeClaimTemplates));
    describeEvents(w, events);
  });
}

export function describeDaemonSet(daemon: Json, pods: PodCounts, events: Json[]): string {
  return tabbed((w) => {
    const meta = obj(daemon.metadata);
    const status = obj(daemon.status);
    w.write(0, `Name:\t${str(meta.name)}\n`);
    w.write(0, `Namespace:\t${str(meta.namespace)}\n`);
    w.write(0, `Selector:\t${selectorString(daemon.spec?.selector)}\n`);
    w.write(0, `Node-Selector:\t${formatLabels(daemon.spec?.template?.spec?.nodeSelector)}\n`);
    printLabelsMultiline(w, 'Labels', meta.labels);
    printAnnotationsMultiline(w, 'Annotations', meta.annotations);
    w.write(0, `Desired Number of Nodes Scheduled: ${int(status.desiredNumberScheduled)}\n`);
    w.write(0, `Current Number of Nodes Scheduled: ${int(status.currentNumberScheduled)}\n`);
    w.write(0, `Number of Nodes Scheduled with Up-to-date Pods: ${int(status.updatedNumberScheduled)}\n`);
    w.write(0, `Number of Nodes Scheduled with Available Pods: ${int(status.numberAvailable)}\n`);
    w.write(0, `Number of Nodes Misscheduled: ${int(status.numberMisscheduled)}\n`);
    w.write(0, `Pods Status:\t${podsStatus(pods)}\n`);
    describePodTemplate(w, obj(daemon.spec?.template));
    describeEvents(w, events);
  });
}
