// Where and how a warm connection reaches its cluster: the server URL, TLS material and a source
// of the Authorization header. Built either from a sanitized kubeconfig's inline credentials, or
// (for the in-cluster cluster) from the host's own KubeConfig, whose service-account token file
// is re-read now and then because the kubelet rotates it.
import { readFileSync } from 'node:fs';
import type * as k8s from '@kubernetes/client-node';
import type { ClusterCredentials } from '../credentials/kubeconfig.js';

export interface ConnectionTarget {
  server: string;
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  insecureSkipTlsVerify: boolean;
  tlsServerName?: string;
  /** The Authorization header value, or undefined for none (client certificates). */
  authorization(): Promise<string | undefined>;
}

const fromBase64 = (data: string | undefined) => (data ? Buffer.from(data, 'base64') : undefined);

export function targetFromCredentials(c: ClusterCredentials): ConnectionTarget {
  const header = c.token
    ? `Bearer ${c.token}`
    : c.username
      ? `Basic ${Buffer.from(`${c.username}:${c.password ?? ''}`).toString('base64')}`
      : undefined;
  const target: ConnectionTarget = {
    server: c.server,
    insecureSkipTlsVerify: c.insecureSkipTlsVerify,
    authorization: async () => header,
  };
  const ca = fromBase64(c.caData);
  const cert = fromBase64(c.clientCertificateData);
  const key = fromBase64(c.clientKeyData);
  if (ca) target.ca = ca;
  if (cert) target.cert = cert;
  if (key) target.key = key;
  if (c.tlsServerName) target.tlsServerName = c.tlsServerName;
  return target;
}

const fileOrData = (file: string | undefined, data: string | undefined) =>
  file ? readFileSync(file) : fromBase64(data);

/** Header values from a file-based token are kept this long before client-node is asked again. */
const TOKEN_CACHE_MS = 60_000;

/** The host cluster as the gateway itself reaches it (its kubeconfig or service account). */
export function targetFromKubeConfig(kc: k8s.KubeConfig): ConnectionTarget {
  const cluster = kc.getCurrentCluster();
  const user = kc.getCurrentUser();
  if (!cluster) throw new Error('the host kubeconfig has no current cluster');
  let cached: { value: string | undefined; at: number } | undefined;
  const target: ConnectionTarget = {
    server: cluster.server,
    insecureSkipTlsVerify: cluster.skipTLSVerify === true,
    async authorization() {
      if (cached && Date.now() - cached.at < TOKEN_CACHE_MS) return cached.value;
      const opts: { headers?: Record<string, string | string[]>; auth?: string } = { headers: {} };
      await kc.applyToHTTPSOptions(opts);
      const raw = opts.headers?.Authorization ?? opts.headers?.authorization;
      let value = Array.isArray(raw) ? raw[0] : raw;
      if (!value && opts.auth) value = `Basic ${Buffer.from(opts.auth).toString('base64')}`;
      cached = { value, at: Date.now() };
      return value;
    },
  };
  const ca = fileOrData(cluster.caFile, cluster.caData);
  const cert = fileOrData(user?.certFile, user?.certData);
  const key = fileOrData(user?.keyFile, user?.keyData);
  if (ca) target.ca = ca;
  if (cert) target.cert = cert;
  if (key) target.key = key;
  if (cluster.tlsServerName) target.tlsServerName = cluster.tlsServerName;
  return target;
}
