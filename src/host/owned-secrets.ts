// Secrets that hold credentials kiteline checks (password hashes, API key hashes): created owned
// by their custom resource (so Kubernetes garbage-collects them with it), and rewritten so that
// they end up holding hashes only.
import type * as k8s from '@kubernetes/client-node';
import { hasVersion } from './cache-sync.js';
import { ownerReference } from './crud.js';
import { isAlreadyExists, isNotFound } from './host-errors.js';
import { retryOnConflict } from './retry.js';
import { MANAGED_BY, MANAGED_BY_LABEL } from './resources.js';
import type { HostStore } from './store.js';

export const LAST_APPLIED_ANNOTATION = 'kubectl.kubernetes.io/last-applied-configuration';

export function secretValue(secret: k8s.V1Secret | undefined, key: string): string | undefined {
  const raw = secret?.data?.[key];
  return raw === undefined ? undefined : Buffer.from(raw, 'base64').toString('utf8');
}

function encode(values: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(values).map(([k, v]) => [k, Buffer.from(v, 'utf8').toString('base64')]));
}

/**
 * Creates Secret `name` holding exactly `values`, owned by `owner`; when it already exists, sets
 * those keys, removes the keys in `drop` and the kubectl last-applied annotation (which would
 * keep a plain password), guarded by resourceVersion and retried on conflict.
 */
export async function upsertSecret(
  core: k8s.CoreV1Api,
  namespace: string,
  name: string,
  values: Record<string, string>,
  options: { owner?: k8s.KubernetesObject; drop?: string[] } = {},
): Promise<k8s.V1Secret> {
  try {
    return await core.createNamespacedSecret({
      namespace,
      body: {
        metadata: {
          name,
          labels: { [MANAGED_BY_LABEL]: MANAGED_BY },
          ...(options.owner ? { ownerReferences: [ownerReference(options.owner)] } : {}),
        },
        type: 'Opaque',
        data: encode(values),
      },
    });
  } catch (err) {
    if (!isAlreadyExists(err)) throw err;
  }
  return retryOnConflict(`Secret ${name}`, async () => {
    const current = await core.readNamespacedSecret({ name, namespace });
    const data = { ...current.data };
    for (const key of options.drop ?? []) delete data[key];
    Object.assign(data, encode(values));
    const annotations = { ...current.metadata?.annotations };
    delete annotations[LAST_APPLIED_ANNOTATION];
    return core.replaceNamespacedSecret({
      name,
      namespace,
      body: { ...current, metadata: { ...current.metadata, annotations }, data, stringData: undefined },
    });
  });
}

/** A Secret that belongs to an object: created with it (rolled back with it), deleted with it. */
export interface OwnedSecret {
  name: string;
  values: Record<string, string>;
  /** Keys to remove when the Secret already exists (a plain password applied by hand). */
  drop?: string[];
}

/**
 * Creates or updates `secret` in the install namespace, owned by `owner` (its kind and apiVersion
 * set) when created here; returns once the Secret cache shows it.
 */
export async function writeOwnedSecret(
  host: Pick<HostStore, 'core' | 'namespace' | 'secrets'>,
  owner: k8s.KubernetesObject,
  secret: OwnedSecret,
): Promise<void> {
  const exists = host.secrets.get(secret.name, host.namespace) !== undefined;
  const written = await upsertSecret(host.core, host.namespace, secret.name, secret.values, {
    ...(exists ? {} : { owner }),
    ...(secret.drop ? { drop: secret.drop } : {}),
  });
  await host.secrets.waitFor(secret.name, hasVersion(written));
}

/** Deletes a Secret that kiteline created (managed-by label); leaves anyone else's alone. */
export async function deleteOwnedSecret(
  core: k8s.CoreV1Api,
  namespace: string,
  secret: k8s.V1Secret | undefined,
): Promise<void> {
  if (!secret?.metadata?.name || secret.metadata.labels?.[MANAGED_BY_LABEL] !== MANAGED_BY) return;
  try {
    await core.deleteNamespacedSecret({ name: secret.metadata.name, namespace });
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}
