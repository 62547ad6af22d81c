// Kubeconfig files written by the control plane: the admin's (a token) and the node components'
// (client certificates), all with the control plane's CA inlined.
import { stringify } from 'yaml';

export type KubeconfigUser = { token: string } | { 'client-certificate-data': string; 'client-key-data': string };

export function kubeconfigYaml(
  name: string,
  server: string,
  caPem: string,
  user: KubeconfigUser,
  userName = `${name}-admin`,
): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster: { server, 'certificate-authority-data': Buffer.from(caPem).toString('base64') } }],
    users: [{ name: userName, user }],
    contexts: [{ name, context: { cluster: name, user: userName } }],
    'current-context': name,
  });
}

/** The user entry for a client certificate and key in PEM. */
export function certificateUser(certPem: string, keyPem: string): KubeconfigUser {
  return {
    'client-certificate-data': Buffer.from(certPem).toString('base64'),
    'client-key-data': Buffer.from(keyPem).toString('base64'),
  };
}
