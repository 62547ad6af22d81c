// The host cluster's client: a KubeConfig from a file or the in-cluster service account, and the
// API clients made from it (every one translating its failures: host-errors.ts).
import * as k8s from '@kubernetes/client-node';
import { join } from 'node:path';
import { SERVICE_ACCOUNT_DIR, type Config } from '../config.js';
import type { Logger } from '../log.js';
import { translatingClient } from './host-errors.js';

export function loadHostKubeConfig(
  config: Pick<Config, 'kubeconfig'> & Partial<Pick<Config, 'serviceAccountDir'>>,
): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  if (config.kubeconfig) kc.loadFromFile(config.kubeconfig);
  else if (!config.serviceAccountDir || config.serviceAccountDir === SERVICE_ACCOUNT_DIR) kc.loadFromCluster();
  else loadFromServiceAccountDir(kc, config.serviceAccountDir);
  return kc;
}

/** loadFromCluster with the service-account files in another directory (tests run "as a pod"). */
function loadFromServiceAccountDir(kc: k8s.KubeConfig, dir: string): void {
  const host = process.env.KUBERNETES_SERVICE_HOST ?? '';
  const port = process.env.KUBERNETES_SERVICE_PORT ?? '443';
  const server = `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
  kc.loadFromOptions({
    clusters: [{ name: 'inCluster', server, caFile: join(dir, 'ca.crt'), skipTLSVerify: false }],
    users: [{ name: 'inClusterUser', authProvider: { name: 'tokenFile', config: { tokenFile: join(dir, 'token') } } }],
    contexts: [{ name: 'inClusterContext', cluster: 'inCluster', user: 'inClusterUser' }],
    currentContext: 'inClusterContext',
  });
}

/** A host API client whose failures arrive translated into kiteline's errors (host-errors.ts). */
export function hostApiClient<T extends k8s.ApiType>(
  kc: k8s.KubeConfig,
  api: new (config: k8s.Configuration) => T,
  log: Logger,
): T {
  return translatingClient(kc.makeApiClient(api), log);
}
