// Scale set-up: Cluster CRs with kubeconfig Secrets applied with kubectl (as a GitOps tool would),
// and thousands of Users created directly as CRs through the host API.
import { spawnSync } from 'node:child_process';
import { ensureBinaries } from '../src/controlplane/binaries.js';
import { API_VERSION, ID_LABEL } from '../src/host/resources.js';
import type { DirectKube } from './kube.js';

/** A kubeconfig Secret plus the Cluster CR that references it (with its id label when given). */
export function clusterObjects(namespace: string, name: string, kubeconfig: string, id?: number): object[] {
  const secret = `${name}-kubeconfig`;
  const labels = id === undefined ? {} : { labels: { [ID_LABEL]: String(id) } };
  return [
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: secret, namespace },
      type: 'Opaque',
      stringData: { kubeconfig },
    },
    {
      apiVersion: API_VERSION,
      kind: 'Cluster',
      metadata: { name, namespace, ...labels },
      spec: { name, enabled: true, kubeconfigSecretRef: { name: secret, key: 'kubeconfig' } },
    },
  ];
}

/** Runs kubectl; throws with its message on failure. */
function kubectl(kubeconfig: string, args: string[], input?: string): void {
  const res = spawnSync(ensureBinaries().kubectl, ['--kubeconfig', kubeconfig, ...args], {
    input,
    encoding: 'utf8',
    timeout: 300_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  if (res.status !== 0) throw new Error(`kubectl ${args[0]} failed: ${res.stderr || res.error?.message}`);
}

/** `kubectl apply -f -` of a List of objects. */
export function kubectlApply(kubeconfig: string, objects: object[]): void {
  kubectl(kubeconfig, ['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }));
}

/** Deletes every object of a kind in a namespace (`kubectl delete --all`). */
export function kubectlDeleteAll(kubeconfig: string, namespace: string, kind: string): void {
  kubectl(kubeconfig, ['-n', namespace, 'delete', kind, '--all', '--wait=true']);
}

/** The first ids of the benchmark's clusters and users (far above the ones the gateway assigns). */
export const FIRST_CLUSTER_ID = 1000;
const FIRST_USER_ID = 1000;

/**
 * Creates `count` User CRs with ids already assigned (no password Secret: none of them logs in,
 * and 10,000 scrypt hashes through the admin API would take longer than the whole benchmark).
 */
export async function createUsers(host: DirectKube, namespace: string, count: number): Promise<void> {
  const path = `/apis/${API_VERSION}/namespaces/${namespace}/users`;
  await host.createMany(path, 0, count, 32, (i) => ({
    apiVersion: API_VERSION,
    kind: 'User',
    metadata: { name: `bench-user-${i}`, labels: { [ID_LABEL]: String(FIRST_USER_ID + i) } },
    spec: { username: `user-${i}`, name: `Bench User ${i}`, provider: 'password', enabled: true, roles: ['viewer'] },
  }));
}
