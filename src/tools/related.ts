// The objects related to one object, for Kite's "Related" tab (GET …/<name>/related →
// [{type, name, namespace?, apiVersion}]):
// - its owners, walked up (a Pod's ReplicaSet, then that ReplicaSet's Deployment), and the objects it
//   owns, walked down through the kinds controllers create (a Deployment's ReplicaSets and their
//   Pods, a CronJob's Jobs and their Pods, ...), found by their ownerReferences' UID;
// - for anything with a pod template (or a Pod): the Services selecting its pod labels, the
//   Ingresses routing to those Services, and the ConfigMaps, Secrets, PersistentVolumeClaims and
//   ServiceAccount the template references (volumes, projected sources, envFrom, env valueFrom,
//   imagePullSecrets; a StatefulSet's claim templates give its pods' claims);
// - the other way round: a Service's selected Pods and routing Ingresses, an Ingress's Services,
//   the workloads (without a controller of their own) that reference a ConfigMap, Secret, claim or
//   ServiceAccount, a claim's PersistentVolume, an autoscaler's target.
// Every kind is resolved through the cluster's discovery. Reads go through the describe reader
// (src/describe/related.ts): kiteline's own connection, only what kiteline's roles let the caller
// read, through the host guard; a read the caller may not do just finds nothing. Every item
// answered is one the caller may `get` or `list` in its namespace.
import type { ResolvedResource } from '../clusters/types.js';
import type { Json } from '../describe/format.js';
import type { RelatedReader } from '../describe/related.js';
import { HttpError } from '../errors.js';
import { apiVersionOf } from '../cluster-access/target.js';
import { KindResolver } from './kinds.js';
import { labelSelectorString, type ToolContext } from '../cluster-access/calls.js';

/** One related object, as Kite's UI reads it (`type` is the plural resource name). */
export interface RelatedObject {
  type: string;
  name: string;
  /** Absent for a cluster-scoped kind. */
  namespace?: string;
  apiVersion: string;
}

/** What controllers create, by owner kind (discovery names `<plural>.<group>`). */
const OWNED_KINDS: Record<string, readonly string[]> = {
  'deployments.apps': ['replicasets.apps'],
  'replicasets.apps': ['pods'],
  'statefulsets.apps': ['pods'],
  'daemonsets.apps': ['pods'],
  'jobs.batch': ['pods'],
  'cronjobs.batch': ['jobs.batch'],
  replicationcontrollers: ['pods'],
};

/** Kinds a pod template can run in, searched for the users of a ConfigMap, Secret, claim or ServiceAccount. */
const WORKLOAD_KINDS = [
  'deployments.apps',
  'statefulsets.apps',
  'daemonsets.apps',
  'cronjobs.batch',
  'jobs.batch',
  'replicationcontrollers',
  'pods',
] as const;

/** The kinds a pod template references, by the resource name this file files them under. */
const REFERENCED_KINDS = ['configmaps', 'secrets', 'persistentvolumeclaims', 'serviceaccounts'] as const;
type ReferencedKind = (typeof REFERENCED_KINDS)[number];
type References = Record<ReferencedKind, Set<string>>;

/** How far owners are walked up and owned objects down. */
const MAX_DEPTH = 5;

function qualifiedName(resolved: ResolvedResource): string {
  return resolved.group === '' ? resolved.resource : `${resolved.resource}.${resolved.group}`;
}

function names(values: unknown): Set<string> {
  const out = new Set<string>();
  for (const v of Array.isArray(values) ? values : []) if (typeof v === 'string' && v !== '') out.add(v);
  return out;
}

/** A pod's spec and labels, or those of an object's pod template (workloads, CronJobs' job template). */
export function podTemplateOf(object: Json): { labels: Record<string, string>; spec: Json } | undefined {
  const candidates = [
    object.kind === 'Pod' ? { metadata: object.metadata, spec: object.spec } : undefined,
    object.spec?.template,
    object.spec?.jobTemplate?.spec?.template,
  ];
  for (const template of candidates) {
    if (template && Array.isArray(template.spec?.containers))
      return { labels: template.metadata?.labels ?? {}, spec: template.spec };
  }
  return undefined;
}

/** The ConfigMaps, Secrets, claims and ServiceAccount a pod spec references. */
export function podSpecReferences(spec: Json): References {
  const refs: References = {
    configmaps: new Set(),
    secrets: new Set(),
    persistentvolumeclaims: new Set(),
    serviceaccounts: new Set(),
  };
  const add = (kind: ReferencedKind, name: unknown) => {
    if (typeof name === 'string' && name !== '') refs[kind].add(name);
  };
  for (const volume of spec.volumes ?? []) {
    add('configmaps', volume.configMap?.name);
    add('secrets', volume.secret?.secretName);
    add('persistentvolumeclaims', volume.persistentVolumeClaim?.claimName);
    for (const source of volume.projected?.sources ?? []) {
      add('configmaps', source.configMap?.name);
      add('secrets', source.secret?.name);
    }
  }
  for (const container of [
    ...(spec.initContainers ?? []),
    ...(spec.containers ?? []),
    ...(spec.ephemeralContainers ?? []),
  ]) {
    for (const from of container.envFrom ?? []) {
      add('configmaps', from.configMapRef?.name);
      add('secrets', from.secretRef?.name);
    }
    for (const env of container.env ?? []) {
      add('configmaps', env.valueFrom?.configMapKeyRef?.name);
      add('secrets', env.valueFrom?.secretKeyRef?.name);
    }
  }
  for (const pullSecret of spec.imagePullSecrets ?? []) add('secrets', pullSecret?.name);
  add('serviceaccounts', spec.serviceAccountName || spec.serviceAccount || 'default');
  return refs;
}

/** Whether a Service's selector (non-empty) selects pods with these labels. */
function selects(service: Json, labels: Record<string, string>): boolean {
  const selector: Record<string, string> = service.spec?.selector ?? {};
  const entries = Object.entries(selector);
  return entries.length > 0 && entries.every(([k, v]) => labels[k] === v);
}

/** The Services an Ingress routes to (networking.k8s.io/v1 and the older v1beta1 shape). */
export function ingressServiceNames(ingress: Json): Set<string> {
  const spec = ingress.spec ?? {};
  const backends = [spec.defaultBackend, spec.backend];
  for (const rule of spec.rules ?? []) for (const path of rule?.http?.paths ?? []) backends.push(path?.backend);
  return names(backends.map((b) => b?.service?.name ?? b?.serviceName));
}

/** Collects the related objects of one object; one instance per request. */
export class RelatedFinder {
  private readonly found = new Map<string, RelatedObject & { resolved: ResolvedResource }>();
  private readonly kinds: KindResolver;
  private readonly visited = new Set<string>();

  constructor(
    private readonly ctx: ToolContext,
    private readonly reader: RelatedReader,
  ) {
    this.kinds = new KindResolver(ctx);
  }

  /** Everything related to `object` (of kind `resolved`), that the caller may read. */
  async find(resolved: ResolvedResource, object: Json): Promise<RelatedObject[]> {
    const namespace: string | undefined = resolved.namespaced ? object.metadata?.namespace : undefined;
    this.visited.add(object.metadata?.uid ?? '');
    await this.owners(object, namespace, 0);
    const owned = await this.owned(resolved, object, namespace, 0);
    const template = podTemplateOf(object);
    if (template && namespace) {
      const services = await this.servicesSelecting(namespace, template.labels);
      await this.ingressesRoutingTo(namespace, services);
      const refs = podSpecReferences(template.spec);
      if (qualifiedName(resolved) === 'statefulsets.apps') this.claimsOfStatefulSetPods(object, owned, refs);
      for (const kind of REFERENCED_KINDS) for (const name of refs[kind]) await this.addNamed(kind, namespace, name);
    }
    if (namespace) await this.reverse(resolved, object, namespace);
    this.found.delete(key(resolved, namespace, object.metadata?.name));
    const visible: RelatedObject[] = [];
    for (const item of this.found.values()) {
      if (await this.reader.mayRead(item.resolved, item.namespace, item.name)) {
        visible.push({
          type: item.type,
          name: item.name,
          ...(item.namespace ? { namespace: item.namespace } : {}),
          apiVersion: item.apiVersion,
        });
      }
    }
    return visible;
  }

  private add(resolved: ResolvedResource, namespace: string | undefined, name: string): void {
    const ns = resolved.namespaced ? namespace : undefined;
    const k = key(resolved, ns, name);
    if (!this.found.has(k))
      this.found.set(k, {
        type: resolved.resource,
        name,
        ...(ns ? { namespace: ns } : {}),
        apiVersion: apiVersionOf(resolved),
        resolved,
      });
  }

  /** Adds an object named by reference (its kind by discovery name); a kind the cluster lacks adds nothing. */
  private async addNamed(kind: string, namespace: string | undefined, name: string): Promise<void> {
    const resolved = await this.ctx.conn.resolveResource(kind);
    if (resolved) this.add(resolved, namespace, name);
  }

  /**
   * The objects of a kind in a namespace, or none when the caller may not list them (or the cluster lacks the
   * kind).
   */
  private async list(
    kind: string,
    namespace: string,
    labelSelector?: string,
  ): Promise<{ resolved: ResolvedResource; items: Json[] } | undefined> {
    const resolved = await this.ctx.conn.resolveResource(kind);
    if (!resolved) return undefined;
    const items = await quietly(() => this.reader.listOf(resolved, namespace, labelSelector ? { labelSelector } : {}));
    return items ? { resolved, items } : undefined;
  }

  /** Owners, walked up as far as the caller may read them. */
  private async owners(object: Json, namespace: string | undefined, depth: number): Promise<void> {
    if (depth >= MAX_DEPTH) return;
    for (const ref of object.metadata?.ownerReferences ?? []) {
      if (
        typeof ref?.apiVersion !== 'string' ||
        typeof ref.kind !== 'string' ||
        typeof ref.name !== 'string' ||
        this.visited.has(ref.uid)
      )
        continue;
      this.visited.add(ref.uid);
      const resolved = await this.kinds.resolve(ref.apiVersion, ref.kind);
      if (!resolved) continue;
      const ownerNamespace = resolved.namespaced ? namespace : undefined;
      this.add(resolved, ownerNamespace, ref.name);
      const owner = await quietly(() => this.reader.getOf(resolved, ownerNamespace, ref.name));
      if (owner && owner.metadata?.uid === ref.uid) await this.owners(owner, ownerNamespace, depth + 1);
    }
  }

  /** The objects `object` owns through the kinds its controller creates, walked down; returns the direct ones. */
  private async owned(
    resolved: ResolvedResource,
    object: Json,
    namespace: string | undefined,
    depth: number,
  ): Promise<Json[]> {
    const direct: Json[] = [];
    const uid = object.metadata?.uid;
    if (!namespace || !uid || depth >= MAX_DEPTH) return direct;
    for (const childKind of OWNED_KINDS[qualifiedName(resolved)] ?? []) {
      const selector =
        object.spec?.selector && typeof object.spec.selector === 'object'
          ? labelSelectorString(object.spec.selector)
          : undefined;
      const children = await this.list(childKind, namespace, selector);
      for (const child of children?.items ?? []) {
        if (
          !(child.metadata?.ownerReferences ?? []).some((r: Json) => r?.uid === uid) ||
          this.visited.has(child.metadata.uid)
        )
          continue;
        this.visited.add(child.metadata.uid);
        direct.push(child);
        this.add(children!.resolved, namespace, child.metadata.name);
        await this.owned(children!.resolved, child, namespace, depth + 1);
      }
    }
    return direct;
  }

  /** Services whose selector selects these pod labels. */
  private async servicesSelecting(namespace: string, labels: Record<string, string>): Promise<Set<string>> {
    const services = await this.list('services', namespace);
    const selecting = new Set<string>();
    for (const service of services?.items ?? []) {
      if (!selects(service, labels)) continue;
      selecting.add(service.metadata.name);
      this.add(services!.resolved, namespace, service.metadata.name);
    }
    return selecting;
  }

  /** Ingresses with a backend among these Services. */
  private async ingressesRoutingTo(namespace: string, services: Set<string>): Promise<void> {
    if (services.size === 0) return;
    const ingresses =
      (await this.list('ingresses.networking.k8s.io', namespace)) ?? (await this.list('ingresses', namespace));
    for (const ingress of ingresses?.items ?? []) {
      if ([...ingressServiceNames(ingress)].some((name) => services.has(name)))
        this.add(ingresses!.resolved, namespace, ingress.metadata.name);
    }
  }

  /** A StatefulSet's pods each get a claim `<claim template>-<pod>`. */
  private claimsOfStatefulSetPods(statefulSet: Json, pods: Json[], refs: References): void {
    for (const claimTemplate of statefulSet.spec?.volumeClaimTemplates ?? []) {
      const templateName = claimTemplate?.metadata?.name;
      if (typeof templateName !== 'string') continue;
      for (const pod of pods) refs.persistentvolumeclaims.add(`${templateName}-${pod.metadata.name}`);
    }
  }

  /**
   * What points at the object: a Service's pods and Ingresses, an Ingress's Services, the users of a ConfigMap,
   * ....
   */
  private async reverse(resolved: ResolvedResource, object: Json, namespace: string): Promise<void> {
    const name: string = object.metadata?.name;
    const kind = qualifiedName(resolved);
    if (kind === 'services') {
      const selector = object.spec?.selector ?? {};
      if (Object.keys(selector).length > 0) {
        const pods = await this.list('pods', namespace, labelSelectorString({ matchLabels: selector }));
        for (const pod of pods?.items ?? []) this.add(pods!.resolved, namespace, pod.metadata.name);
      }
      await this.ingressesRoutingTo(namespace, new Set([name]));
    } else if (resolved.resource === 'ingresses') {
      for (const service of ingressServiceNames(object)) await this.addNamed('services', namespace, service);
    } else if ((REFERENCED_KINDS as readonly string[]).includes(kind)) {
      await this.workloadsReferencing(kind as ReferencedKind, namespace, name);
      if (kind === 'persistentvolumeclaims' && typeof object.spec?.volumeName === 'string' && object.spec.volumeName) {
        await this.addNamed('persistentvolumes', undefined, object.spec.volumeName);
      }
    } else if (resolved.resource === 'horizontalpodautoscalers') {
      const target = object.spec?.scaleTargetRef ?? {};
      const targetKind =
        typeof target.apiVersion === 'string' && typeof target.kind === 'string'
          ? await this.kinds.resolve(target.apiVersion, target.kind)
          : undefined;
      if (targetKind && typeof target.name === 'string') this.add(targetKind, namespace, target.name);
    }
  }

  /** Workloads without a controller of their own whose pod template references the object. */
  private async workloadsReferencing(kind: ReferencedKind, namespace: string, name: string): Promise<void> {
    for (const workloadKind of WORKLOAD_KINDS) {
      const workloads = await this.list(workloadKind, namespace);
      for (const workload of workloads?.items ?? []) {
        if ((workload.metadata?.ownerReferences ?? []).some((r: Json) => r?.controller)) continue;
        const template = podTemplateOf(workload);
        if (template && podSpecReferences(template.spec)[kind].has(name))
          this.add(workloads!.resolved, namespace, workload.metadata.name);
      }
    }
  }
}

function key(resolved: ResolvedResource, namespace: string | undefined, name: string | undefined): string {
  return `${resolved.group}/${resolved.resource}/${namespace ?? ''}/${name ?? ''}`;
}

/** A read's result, or undefined when the caller may not do it (403) or the object is gone (404). */
async function quietly<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (err) {
    if (err instanceof HttpError && (err.status === 403 || err.status === 404)) return undefined;
    throw err;
  }
}
