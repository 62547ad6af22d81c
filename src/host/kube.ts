// The host cluster's client: a KubeConfig from a file or the in-cluster service account, and the
// small helpers every host store uses to read client-node errors.
import * as k8s from '@kubernetes/client-node';
import { join } from 'node:path';
import { SERVICE_ACCOUNT_DIR, type Config } from '../config.js';
import { ServiceUnavailableError } from '../errors.js';

export function loadHostKubeConfig(config: Pick<Config, 'kubeconfig'> & Partial<Pick<Config, 'serviceAccountDir'>>): k8s.KubeConfig {
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

/** The HTTP status of a failed client-node call, or undefined for network and other errors. */
export function apiStatus(err: unknown): number | undefined {
  if (err instanceof k8s.ApiException) return err.code;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

export const isNotFound = (err: unknown) => apiStatus(err) === 404;
export const isConflict = (err: unknown) => apiStatus(err) === 409;

/** A short, secret-free description of a client-node error (its message embeds whole bodies). */
export function describeApiError(err: unknown): string {
  if (err instanceof k8s.ApiException) {
    let message = '';
    try {
      const body = typeof err.body === 'string' ? JSON.parse(err.body) : err.body;
      message = body?.message ?? '';
    } catch {
      /* body was not JSON */
    }
    return `HTTP ${err.code}${message ? `: ${message}` : ''}`;
  }
  return (err as Error)?.message ?? String(err);
}

/** Network failures of a host-cluster call: the host API server is down, restarting or cut off. */
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EPIPE', 'EAI_AGAIN']);

/**
 * A host-cluster call that failed because the host cannot serve it now (unreachable, or a 5xx or
 * 429 from its API server): the caller gets a clean 503 to retry, never a 500. Undefined otherwise.
 */
export function hostUnavailable(err: unknown): ServiceUnavailableError | undefined {
  if (err instanceof k8s.ApiException) {
    return err.code >= 500 || err.code === 429 ? new ServiceUnavailableError(`the host cluster could not complete the request (HTTP ${err.code}); try again`) : undefined;
  }
  const e = err as { name?: unknown; code?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  if (e?.name === 'FetchError' || UNREACHABLE_CODES.has(code)) {
    return new ServiceUnavailableError(`the host cluster is unavailable${code ? ` (${code})` : ''}; try again`);
  }
  return undefined;
}
