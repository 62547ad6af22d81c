// The text `kubectl describe` prints for one object, built from the cluster's data: picks the
// describer of the object's kind (as kubectl's describer map does, by API group and kind), reads
// what that describer needs besides the object (src/describe/related.ts) and hands back the text.
// Kinds without a describer of their own here get kubectl's generic describer.
import { HttpError } from '../errors.js';
import { describeConfigMap, describePersistentVolumeClaim, describeSecret, podsUsingClaim } from './config.js';
import { describeCronJob, describeJob } from './batch.js';
import { eventsOrNone, refOf, searchEvents } from './events.js';
import { obj, selectorString, str, type Json } from './format.js';
import { describeGeneric } from './generic.js';
import { describeNamespace, describeNode, type LeaseResult } from './nodes.js';
import { describePod, podEventRef } from './pods.js';
import type { RelatedReader } from './related.js';
import { describeIngress, describeService, serviceSliceSelector } from './services.js';
import {
  countPods,
  describeDaemonSet,
  describeDeployment,
  describeReplicaSet,
  describeStatefulSet,
  type PodCounts,
} from './workloads.js';

type Describer = (object: Json, related: RelatedReader) => Promise<string>;

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** A related read that failed because the client left must not be papered over. */
function rethrowIfAborted(related: RelatedReader, err: unknown): void {
  if (related.isAborted()) throw err;
}

/** The pods a controller selects, counted by phase (kubectl's getPodStatusForController). */
async function controllerPods(object: Json, related: RelatedReader): Promise<PodCounts> {
  const pods = await related.list('pods', str(object.metadata?.namespace), {
    labelSelector: selectorString(object.spec?.selector),
  });
  return countPods(pods, str(object.metadata?.uid));
}

const events = (object: Json, related: RelatedReader) => eventsOrNone(related, refOf(object));

/** A list that a cluster may not serve: undefined on 404 (kubectl leaves the section out). */
async function listUnlessMissing(
  related: RelatedReader,
  kind: 'resourcequotas' | 'limitranges',
  namespace: string,
): Promise<Json[] | undefined> {
  try {
    return await related.list(kind, namespace);
  } catch (err) {
    if (err instanceof HttpError && err.status === 404) return undefined;
    throw err;
  }
}

const pod: Describer = async (p, related) => describePod(p, await eventsOrNone(related, podEventRef(p)));

const deployment: Describer = async (d, related) => {
  let replicaSets: Json[] = [];
  try {
    replicaSets = await related.list('replicasets', str(d.metadata?.namespace), {
      labelSelector: selectorString(d.spec?.selector),
    });
  } catch (err) {
    rethrowIfAborted(related, err);
  }
  return describeDeployment(d, replicaSets, await events(d, related));
};

const replicaSet: Describer = async (rs, related) => {
  let pods: PodCounts | string;
  try {
    pods = await controllerPods(rs, related);
  } catch (err) {
    rethrowIfAborted(related, err);
    pods = errorText(err);
  }
  return describeReplicaSet(rs, pods, await events(rs, related));
};

const statefulSet: Describer = async (s, related) =>
  describeStatefulSet(s, await controllerPods(s, related), await events(s, related));
const daemonSet: Describer = async (d, related) =>
  describeDaemonSet(d, await controllerPods(d, related), await events(d, related));

/** A Service's EndpointSlices; none when they cannot be listed (kubectl ignores that error). */
const service: Describer = async (svc, related) => {
  let slices: Json[] = [];
  try {
    slices = await related.list('endpointslices', str(svc.metadata?.namespace), {
      labelSelector: serviceSliceSelector(str(svc.metadata?.name)),
    });
  } catch (err) {
    rethrowIfAborted(related, err);
  }
  return describeService(svc, slices, await events(svc, related));
};

const node: Describer = async (n, related) => {
  const name = str(n.metadata?.name);
  let pods: Json[] | undefined;
  try {
    pods = await related.list('pods', undefined, {
      fieldSelector: `spec.nodeName=${name},status.phase!=Succeeded,status.phase!=Failed`,
    });
  } catch (err) {
    if (!(err instanceof HttpError) || err.status !== 403) throw err;
  }
  let lease: LeaseResult;
  try {
    lease = { lease: await related.get('leases', 'kube-node-lease', name) };
  } catch (err) {
    rethrowIfAborted(related, err);
    lease = { error: errorText(err) };
  }
  // A Node's events are in any namespace, some with the node's UID (controllers), some with its name
  // as UID (the kubelet): kubectl searches both and lists them together.
  const ref = { kind: str(n.kind) || 'Node', name, namespace: '' };
  const nodeEvents = [
    ...(await eventsOrNone(related, { ...ref, uid: str(n.metadata?.uid) })),
    ...(await eventsOrNone(related, { ...ref, uid: name })),
  ];
  return describeNode(n, pods, lease, nodeEvents);
};

const namespace: Describer = async (ns, related) => {
  const name = str(ns.metadata?.name);
  return describeNamespace(
    ns,
    await listUnlessMissing(related, 'resourcequotas', name),
    await listUnlessMissing(related, 'limitranges', name),
  );
};

const configMap: Describer = async (cm, related) => describeConfigMap(cm, await searchEvents(related, refOf(cm)));
const secret: Describer = async (s) => describeSecret(s);

const persistentVolumeClaim: Describer = async (pvc, related) => {
  const pods = podsUsingClaim(await related.list('pods', str(pvc.metadata?.namespace)), pvc);
  return describePersistentVolumeClaim(pvc, await events(pvc, related), pods);
};

const job: Describer = async (j, related) => describeJob(j, await events(j, related));
const cronJob: Describer = async (c, related) => describeCronJob(c, await events(c, related));
const ingress: Describer = async (i, related) => describeIngress(i, await events(i, related), related);

/** kubectl's describer map, by "<group>/<Kind>" (the core group is ""). */
const DESCRIBERS: Record<string, Describer> = {
  '/Pod': pod,
  '/Service': service,
  '/Node': node,
  '/Namespace': namespace,
  '/ConfigMap': configMap,
  '/Secret': secret,
  '/PersistentVolumeClaim': persistentVolumeClaim,
  'apps/Deployment': deployment,
  'extensions/Deployment': deployment,
  'apps/ReplicaSet': replicaSet,
  'extensions/ReplicaSet': replicaSet,
  'apps/StatefulSet': statefulSet,
  'apps/DaemonSet': daemonSet,
  'extensions/DaemonSet': daemonSet,
  'batch/Job': job,
  'batch/CronJob': cronJob,
  'networking.k8s.io/Ingress': ingress,
  'extensions/Ingress': ingress,
};

/** Whether kiteline has a describer of its own for the kind (else the generic one is used). */
export function hasOwnDescriber(group: string, kind: string): boolean {
  return `${group}/${kind}` in DESCRIBERS;
}

/**
 * The describe text of an object read from the cluster. `group` is the API group the object was
 * read from; the object's own `kind` picks the describer.
 */
export async function describe(group: string, object: Json, related: RelatedReader): Promise<string> {
  const kind = str(object.kind);
  const describer = DESCRIBERS[`${group}/${kind}`];
  if (describer) return describer(object, related);
  const ref = refOf(object);
  return describeGeneric(
    object,
    await eventsOrNone(related, { ...ref, namespace: str(obj(object.metadata).namespace) }),
  );
}
