// Host-store writes for Cluster custom resources and their kubeconfig Secrets: create (atomic on
// the object name derived from the cluster name), update with a resourceVersion compare-and-swap
// (retried on conflict, so concurrent writers never lose each other's changes), delete, the
// default-cluster flag, and the import lock that lets exactly one bootstrap import win.
import * as k8s from '@kubernetes/client-node';
import { BadRequestError, ConflictError, NotFoundError } from '../errors.js';
import { apiStatus } from './kube.js';
import { objectNameFor } from './names.js';
import type { IdAllocator } from './ids.js';
import { CustomResources, ownerReference } from './crud.js';
import { ID_LABEL, MANAGED_BY, MANAGED_BY_LABEL, type ClusterResource, type ClusterSpec } from './resources.js';
import type { HostStore } from './store.js';

/** When spec.isDefault was last set through the API (ISO time): the newest default wins a race. */
export const DEFAULT_SINCE_ANNOTATION = 'kiteline.io/default-since';
/** ConfigMap whose atomic creation makes one bootstrap import the winner. */
export const IMPORT_LOCK_CONFIGMAP = 'kiteline-cluster-import-lock';
export const KUBECONFIG_KEY = 'kubeconfig';

/** The name clients use for a Cluster object. */
export function clusterDisplayName(cr: ClusterResource): string {
  return cr.spec?.name || cr.metadata.name;
}

export function kubeconfigSecretName(objectName: string): string {
  return `${objectName}-kubeconfig`;
}

/** When this cluster became the default (ms), for breaking a tie between two defaults. */
export function defaultSince(cr: ClusterResource): number {
  const raw = cr.metadata.annotations?.[DEFAULT_SINCE_ANNOTATION] ?? cr.metadata.creationTimestamp;
  const ms = raw ? new Date(raw as unknown as string).getTime() : 0;
  return Number.isFinite(ms) ? ms : 0;
}

export interface NewCluster {
  name: string;
  description: string;
  prometheusURL: string;
  inCluster: boolean;
  isDefault: boolean;
  enabled: boolean;
  impersonate: boolean;
  /** Sanitized single-context kubeconfig; absent for inCluster. */
  kubeconfig?: string;
}

export type ClusterChanges = Partial<Omit<NewCluster, 'kubeconfig'>> & { kubeconfig?: string };

/** Runs a compare-and-swap write: false when it lost (409) or the object is gone (404). */
async function casWrite(write: () => Promise<unknown>): Promise<boolean> {
  try {
    await write();
    return true;
  } catch (err) {
    if (apiStatus(err) === 409 || apiStatus(err) === 404) return false;
    throw err;
  }
}

export class ClusterWrites {
  private readonly crs: CustomResources<ClusterResource>;

  constructor(
    private readonly host: HostStore,
    private readonly ids: IdAllocator,
  ) {
    this.crs = new CustomResources<ClusterResource>(host.customObjects, host.namespace, 'clusters', 'Cluster');
  }

  /** Is the name taken by any Cluster object (by its spec.name or, without one, its metadata.name)? */
  nameTaken(name: string, exceptObject?: string): boolean {
    return this.host.clusters.list().some((cr) => cr.metadata.name !== exceptObject && clusterDisplayName(cr) === name);
  }

  /** Creates the Cluster object and its kubeconfig Secret; duplicate name → ConflictError. */
  async create(input: NewCluster): Promise<{ id: number; objectName: string }> {
    if (this.nameTaken(input.name)) throw new ConflictError(`cluster already exists: ${input.name}`, 'AlreadyExists');
    const id = await this.ids.next('clusters');
    let objectName = objectNameFor('cluster', input.name);
    const occupant = this.host.clusters.get(objectName, this.host.namespace);
    // A renamed cluster keeps its object name; a new cluster with its old name gets a distinct one.
    if (occupant && clusterDisplayName(occupant) !== input.name) objectName = `${objectName}-${id}`.slice(0, 253);
    const secretName = kubeconfigSecretName(objectName);
    const spec: ClusterSpec = {
      name: input.name,
      description: input.description,
      prometheusURL: input.prometheusURL,
      inCluster: input.inCluster,
      isDefault: input.isDefault,
      enabled: input.enabled,
      impersonate: input.impersonate,
    };
    if (!input.inCluster) spec.kubeconfigSecretRef = { name: secretName, key: KUBECONFIG_KEY };
    const body: ClusterResource = {
      metadata: {
        name: objectName,
        namespace: this.host.namespace,
        labels: { [ID_LABEL]: String(id), [MANAGED_BY_LABEL]: MANAGED_BY },
        ...(input.isDefault ? { annotations: { [DEFAULT_SINCE_ANNOTATION]: new Date().toISOString() } } : {}),
      },
      spec,
    };
    let created: ClusterResource;
    try {
      created = await this.crs.create(body);
    } catch (err) {
      if (apiStatus(err) === 409) throw new ConflictError(`cluster already exists: ${input.name}`, 'AlreadyExists');
      throw err;
    }
    if (input.kubeconfig !== undefined && !input.inCluster) {
      try {
        await this.writeKubeconfigSecret(created, secretName, input.kubeconfig);
      } catch (err) {
        await this.deleteObject(objectName).catch(() => undefined);
        throw err;
      }
    }
    return { id, objectName };
  }

  /** Stores a kubeconfig in the Secret (created or replaced), owned by the Cluster object. */
  async writeKubeconfigSecret(owner: ClusterResource, secretName: string, kubeconfig: string, key = KUBECONFIG_KEY): Promise<void> {
    const namespace = this.host.namespace;
    const ownerReferences: k8s.V1OwnerReference[] = [{ ...ownerReference(owner), kind: 'Cluster', controller: true }];
    const data = { [key]: Buffer.from(kubeconfig, 'utf8').toString('base64') };
    try {
      await this.host.core.createNamespacedSecret({
        namespace,
        body: { metadata: { name: secretName, namespace, labels: { [MANAGED_BY_LABEL]: MANAGED_BY }, ownerReferences }, type: 'Opaque', data },
      });
      return;
    } catch (err) {
      if (apiStatus(err) !== 409) throw err;
    }
    for (let attempt = 0; attempt < 5; attempt++) {
      const current = await this.host.core.readNamespacedSecret({ name: secretName, namespace });
      const managed = current.metadata?.labels?.[MANAGED_BY_LABEL] === MANAGED_BY;
      const body: k8s.V1Secret = {
        ...current,
        data: { ...current.data, ...data },
        metadata: {
          ...current.metadata,
          // A Secret kiteline created belongs to this Cluster; someone else's keeps its owners.
          ...(managed ? { ownerReferences } : {}),
        },
      };
      try {
        await this.host.core.replaceNamespacedSecret({ name: secretName, namespace, body });
        return;
      } catch (err) {
        if (apiStatus(err) !== 409) throw err;
      }
    }
    throw new ConflictError('the kubeconfig Secret is being changed concurrently; retry');
  }

  /** Applies changes to the Cluster object (compare-and-swap, retried), then its kubeconfig. */
  async update(objectName: string, changes: ClusterChanges): Promise<ClusterResource> {
    let updated: ClusterResource | undefined;
    for (let attempt = 0; attempt < 10 && !updated; attempt++) {
      const current = await this.read(objectName);
      const spec: ClusterSpec = { ...current.spec };
      const metadata = { ...current.metadata, annotations: { ...current.metadata.annotations } };
      for (const key of ['name', 'description', 'prometheusURL', 'inCluster', 'enabled', 'impersonate'] as const) {
        if (changes[key] !== undefined) (spec as Record<string, unknown>)[key] = changes[key];
      }
      if (changes.isDefault !== undefined) {
        if (changes.isDefault && !spec.isDefault) metadata.annotations[DEFAULT_SINCE_ANNOTATION] = new Date().toISOString();
        spec.isDefault = changes.isDefault;
      }
      if (changes.kubeconfig !== undefined && !spec.kubeconfigSecretRef) {
        spec.kubeconfigSecretRef = { name: kubeconfigSecretName(objectName), key: KUBECONFIG_KEY };
      }
      try {
        updated = await this.crs.replace({ ...current, metadata, spec });
      } catch (err) {
        if (apiStatus(err) === 404) throw new NotFoundError('cluster not found');
        if (apiStatus(err) !== 409) throw err;
        await new Promise((r) => setTimeout(r, Math.random() * 20 * (attempt + 1)));
      }
    }
    if (!updated) throw new ConflictError('the cluster is being changed concurrently; retry');
    if (changes.kubeconfig !== undefined) {
      const ref = updated.spec.kubeconfigSecretRef!;
      await this.writeKubeconfigSecret(updated, ref.name, changes.kubeconfig, ref.key || KUBECONFIG_KEY);
    }
    return updated;
  }

  /** Sets isDefault false on every other cluster that has it. */
  async clearDefaultExcept(objectName: string): Promise<void> {
    const others = this.host.clusters.list().filter((cr) => cr.metadata.name !== objectName && cr.spec?.isDefault);
    await Promise.all(
      others.map((cr) =>
        this.update(cr.metadata.name, { isDefault: false }).catch((err) => {
          if (!(err instanceof NotFoundError)) throw err;
        }),
      ),
    );
  }

  /**
   * Deletes the Cluster object and the kubeconfig Secret kiteline manages for it. The default
   * cluster cannot be deleted (400): the check and the delete are one compare-and-swap (a delete
   * preconditioned on the resourceVersion that was checked), so a replica making this cluster the
   * default meanwhile makes the delete fail and be checked again, never leaves no default.
   */
  async delete(objectName: string): Promise<void> {
    let cr: ClusterResource | undefined;
    for (let attempt = 0; !cr; attempt++) {
      const live = await this.read(objectName);
      if (live.spec?.isDefault) throw new BadRequestError('cannot delete default cluster: mark another cluster as default first');
      try {
        await this.crs.delete(objectName, live.metadata.uid, live.metadata.resourceVersion);
        cr = live;
      } catch (err) {
        if (apiStatus(err) === 404) throw new NotFoundError('cluster not found');
        if (apiStatus(err) !== 409) throw err;
        if (attempt >= 10) throw new ConflictError('the cluster is being changed concurrently; retry');
      }
    }
    const ref = cr?.spec?.kubeconfigSecretRef?.name;
    if (!ref) return;
    const secret = this.host.secrets.get(ref, this.host.namespace);
    const ownedHere = secret?.metadata?.ownerReferences?.some((o) => o.kind === 'Cluster' && o.uid === cr?.metadata.uid);
    if (secret && (ownedHere || secret.metadata?.labels?.[MANAGED_BY_LABEL] === MANAGED_BY)) {
      try {
        await this.host.core.deleteNamespacedSecret({ name: ref, namespace: this.host.namespace });
      } catch (err) {
        if (apiStatus(err) !== 404) throw err;
      }
    }
  }

  private async deleteObject(objectName: string): Promise<void> {
    try {
      await this.crs.delete(objectName);
    } catch (err) {
      if (apiStatus(err) === 404) throw new NotFoundError('cluster not found');
      throw err;
    }
  }

  async read(objectName: string): Promise<ClusterResource> {
    try {
      return await this.crs.read(objectName);
    } catch (err) {
      if (apiStatus(err) === 404) throw new NotFoundError('cluster not found');
      throw err;
    }
  }

  /** Writes status (compare-and-swap on the object's resourceVersion). False on conflict. */
  writeStatus(cr: ClusterResource): Promise<boolean> {
    return casWrite(() => this.crs.replaceStatus(cr));
  }

  /** Replaces the whole object (labels, spec) with CAS. False on conflict or when gone. */
  replace(cr: ClusterResource): Promise<boolean> {
    return casWrite(() => this.crs.replace(cr));
  }

  /** Atomically takes the import lock; false when another import holds (or held) it. */
  async acquireImportLock(holder: string): Promise<boolean> {
    try {
      await this.host.core.createNamespacedConfigMap({
        namespace: this.host.namespace,
        body: {
          metadata: { name: IMPORT_LOCK_CONFIGMAP, labels: { [MANAGED_BY_LABEL]: MANAGED_BY } },
          data: { holder, at: new Date().toISOString() },
        },
      });
      return true;
    } catch (err) {
      if (apiStatus(err) === 409) return false;
      throw err;
    }
  }

  async releaseImportLock(): Promise<void> {
    try {
      await this.host.core.deleteNamespacedConfigMap({ name: IMPORT_LOCK_CONFIGMAP, namespace: this.host.namespace });
    } catch (err) {
      if (apiStatus(err) !== 404) throw err;
    }
  }

  /** The import lock's creation time, or undefined when there is none. */
  async importLockCreatedAt(): Promise<Date | undefined> {
    try {
      const cm = await this.host.core.readNamespacedConfigMap({ name: IMPORT_LOCK_CONFIGMAP, namespace: this.host.namespace });
      return cm.metadata?.creationTimestamp ? new Date(cm.metadata.creationTimestamp) : new Date(0);
    } catch (err) {
      if (apiStatus(err) === 404) return undefined;
      throw err;
    }
  }
}
