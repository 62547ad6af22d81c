// The kubeconfig kiteline hands out (POST /api/v1/kubeconfig, and the kubectl console's pod): one
// cluster and one context per cluster, each pointing at kiteline's Kubernetes API for it, one user
// with a bearer token.
import { stringify } from 'yaml';

export interface KubeconfigInput {
  /** Each cluster's name and the server URL that reaches it through kiteline. */
  clusters: Array<{ name: string; server: string }>;
  /** PEM the client must trust for those servers; undefined: the system's roots. */
  caPem: string | undefined;
  /** The user entry's name (`kiteline-<username>`). */
  userName: string;
  token: string;
  /** The current context; must name one of the clusters. */
  current: string;
}

/** The kubeconfig as YAML. */
export function kubeconfigYaml(input: KubeconfigInput): string {
  const ca = input.caPem ? { 'certificate-authority-data': Buffer.from(input.caPem).toString('base64') } : {};
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: input.clusters.map(({ name, server }) => ({ name, cluster: { server, ...ca } })),
    users: [{ name: input.userName, user: { token: input.token } }],
    contexts: input.clusters.map(({ name }) => ({ name, context: { cluster: name, user: input.userName } })),
    'current-context': input.current,
    preferences: {},
  });
}
