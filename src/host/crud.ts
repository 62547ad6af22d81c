// Typed helpers for writing kiteline custom resources in the install namespace: create, read,
// merge-patch (optionally guarded by resourceVersion), replace, status patch or replace, delete.
// Failures arrive translated (the customObjects client is HostStore's: host-errors.ts).
import * as k8s from '@kubernetes/client-node';
import { GROUP, VERSION } from './resources.js';

export type Plural =
  | 'users'
  | 'roles'
  | 'apikeys'
  | 'clusters'
  | 'templates'
  | 'oauthproviders'
  | 'generalsettings'
  | 'ldapsettings'
  | 'chartrepositories'
  | 'passkeys'
  | 'usedchallenges';

const MERGE_PATCH = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

export class CustomResources<T extends k8s.KubernetesObject> {
  constructor(
    private readonly api: k8s.CustomObjectsApi,
    private readonly namespace: string,
    private readonly plural: Plural,
    private readonly kind: string,
  ) {}

  readonly apiVersion = `${GROUP}/${VERSION}`;

  private get target() {
    return { group: GROUP, version: VERSION, namespace: this.namespace, plural: this.plural };
  }

  async create(obj: Omit<T, 'apiVersion' | 'kind'>): Promise<T> {
    const body = { apiVersion: this.apiVersion, kind: this.kind, ...obj };
    return (await this.api.createNamespacedCustomObject({ ...this.target, body })) as T;
  }

  async read(name: string): Promise<T> {
    return (await this.api.getNamespacedCustomObject({ ...this.target, name })) as T;
  }

  /** Every object, read from the API server (a consistent read, not a cache). */
  async list(): Promise<T[]> {
    return ((await this.api.listNamespacedCustomObject(this.target)) as { items: T[] }).items;
  }

  /** JSON merge patch; include metadata.resourceVersion in the patch to make it a compare-and-swap. */
  async patch(name: string, patch: object): Promise<T> {
    return (await this.api.patchNamespacedCustomObject({ ...this.target, name, body: patch }, MERGE_PATCH)) as T;
  }

  async replace(obj: T): Promise<T> {
    return (await this.api.replaceNamespacedCustomObject({
      ...this.target,
      name: obj.metadata!.name!,
      body: obj,
    })) as T;
  }

  /** Replaces the status subresource; obj's resourceVersion makes it a compare-and-swap. */
  async replaceStatus(obj: T): Promise<T> {
    return (await this.api.replaceNamespacedCustomObjectStatus({
      ...this.target,
      name: obj.metadata!.name!,
      body: obj,
    })) as T;
  }

  async patchStatus(name: string, status: object): Promise<T> {
    return (await this.api.patchNamespacedCustomObjectStatus(
      { ...this.target, name, body: { status } },
      MERGE_PATCH,
    )) as T;
  }

  /**
   * Deletes; a uid precondition makes sure it is the object we looked at, a resourceVersion one
   * that it has not changed since (a compare-and-swap: 409 otherwise).
   */
  async delete(name: string, uid?: string, resourceVersion?: string): Promise<void> {
    const preconditions = { ...(uid ? { uid } : {}), ...(resourceVersion ? { resourceVersion } : {}) };
    await this.api.deleteNamespacedCustomObject({
      ...this.target,
      name,
      body: uid || resourceVersion ? { preconditions } : {},
    });
  }
}

export function ownerReference(owner: k8s.KubernetesObject): k8s.V1OwnerReference {
  return {
    apiVersion: owner.apiVersion ?? `${GROUP}/${VERSION}`,
    kind: owner.kind!,
    name: owner.metadata!.name!,
    uid: owner.metadata!.uid!,
  };
}
