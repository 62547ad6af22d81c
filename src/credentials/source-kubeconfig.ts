// Cluster sources (docs/clusters.md, "Clusters from where they already live"): the translation of
// an Argo CD cluster Secret, a Cluster API kubeconfig Secret or a SIG-Multicluster ClusterProfile
// (with its credential Secret) into the one thing kiteline stores for a cluster, a sanitized
// single-context kubeconfig. Pure functions over the objects' JSON: everything goes through
// sanitizeKubeconfig, so a source can no more run a program or read a file on the gateway than a
// kubeconfig sent to the API can. A source that cannot be used yields its reason (never the
// credential) for the Cluster's status.
import { KubeconfigError, parseKubeconfig, sanitizeKubeconfig } from './kubeconfig.js';

export type SourceKind = 'argocd' | 'capi' | 'clusterprofile';

/** Label Argo CD puts on its cluster Secrets. */
export const ARGOCD_SECRET_TYPE_LABEL = 'argocd.argoproj.io/secret-type';
/** Label Cluster API puts on the Secrets of a cluster (its name). */
export const CAPI_CLUSTER_NAME_LABEL = 'cluster.x-k8s.io/cluster-name';
/** Label on a Secret holding the credential for the ClusterProfile it names (same namespace). */
export const CLUSTERPROFILE_CREDENTIALS_LABEL = 'kiteline.io/clusterprofile';
/** spec.clusterManager.name of the ClusterProfiles kiteline publishes (never read back as a source). */
export const KITELINE_CLUSTER_MANAGER = 'kiteline';

/** What a source object says about its cluster. */
export interface SourceCluster {
  kind: SourceKind;
  /** The source object: its namespace and name. */
  namespace: string;
  objectName: string;
  /** The name clients use (x-cluster-name). */
  clusterName: string;
  /** The sanitized single-context kubeconfig, when the source is usable. */
  kubeconfig?: string;
  /** Why the source cannot be used (no secret in it). */
  error?: string;
}

/** The shape of a Secret as the watch delivers it (base64 data). */
export interface SecretLike {
  metadata?: { name?: string; namespace?: string; labels?: Record<string, string> };
  data?: Record<string, string>;
  type?: string;
}

/** The shape of a ClusterProfile (multicluster.x-k8s.io/v1alpha1) as far as kiteline reads it. */
export interface ClusterProfileLike {
  metadata?: { name?: string; namespace?: string };
  spec?: { displayName?: string; clusterManager?: { name?: string } };
  status?: {
    accessProviders?: Array<{ name?: string; cluster?: Record<string, unknown> }>;
    credentialProviders?: Array<{ name?: string; cluster?: Record<string, unknown> }>;
  };
}

type Obj = Record<string, unknown>;

const isObj = (value: unknown): value is Obj => typeof value === 'object' && value !== null && !Array.isArray(value);

function field(secret: SecretLike, key: string): string | undefined {
  const raw = secret.data?.[key];
  return raw === undefined ? undefined : Buffer.from(raw, 'base64').toString('utf8');
}

/** Runs a translation step; a KubeconfigError (or a plain message) becomes the source's error. */
function attempt(base: SourceCluster, build: () => string): SourceCluster {
  try {
    return { ...base, kubeconfig: sanitizeKubeconfig(build()).kubeconfig };
  } catch (err) {
    if (err instanceof KubeconfigError) return { ...base, error: err.message };
    throw err;
  }
}

function ident(obj: { metadata?: { name?: string; namespace?: string } }) {
  return { namespace: obj.metadata?.namespace ?? '', objectName: obj.metadata?.name ?? '' };
}

/** Argo CD fields that would run a program or call a cloud API on the gateway. */
const ARGOCD_REFUSED: Record<string, string> = {
  execProviderConfig:
    'execProviderConfig is not supported (it would run a program on the gateway); use bearerToken or tlsClientConfig',
  awsAuthConfig:
    'awsAuthConfig is not supported (it needs the AWS CLI on the gateway); use bearerToken or tlsClientConfig',
};

/**
 * An Argo CD cluster Secret (label argocd.argoproj.io/secret-type: cluster): `name`, `server` and
 * `config`, a JSON object with `bearerToken`, `username`/`password` and
 * `tlsClientConfig.{caData, certData, keyData, insecure, serverName}` (caData etc. base64 PEM, as
 * Argo CD writes them).
 */
export function fromArgoCdSecret(secret: SecretLike): SourceCluster {
  const id = ident(secret);
  const clusterName = (field(secret, 'name') ?? '').trim() || id.objectName;
  const base: SourceCluster = { kind: 'argocd', ...id, clusterName };
  const server = (field(secret, 'server') ?? '').trim();
  if (!server) return { ...base, error: 'the Argo CD cluster Secret has no server' };
  return attempt(base, () => {
    let config: unknown = {};
    const raw = field(secret, 'config');
    if (raw !== undefined && raw.trim() !== '') {
      try {
        config = JSON.parse(raw);
      } catch {
        throw new KubeconfigError('the Argo CD cluster Secret: config is not valid JSON');
      }
    }
    if (!isObj(config)) throw new KubeconfigError('the Argo CD cluster Secret: config must be a JSON object');
    for (const [key, reason] of Object.entries(ARGOCD_REFUSED)) {
      if (config[key] !== undefined && config[key] !== null) throw new KubeconfigError(reason);
    }
    const tls = config.tlsClientConfig ?? {};
    if (!isObj(tls)) throw new KubeconfigError('the Argo CD cluster Secret: config.tlsClientConfig must be an object');
    const text = (value: unknown, name: string): string | undefined => {
      if (value === undefined || value === null || value === '') return undefined;
      if (typeof value !== 'string') throw new KubeconfigError(`the Argo CD cluster Secret: ${name} must be a string`);
      return value;
    };
    const insecure = tls.insecure;
    if (insecure !== undefined && typeof insecure !== 'boolean')
      throw new KubeconfigError('the Argo CD cluster Secret: tlsClientConfig.insecure must be true or false');
    const cluster: Obj = { server };
    const caData = text(tls.caData, 'tlsClientConfig.caData');
    if (caData) cluster['certificate-authority-data'] = caData;
    if (insecure === true) cluster['insecure-skip-tls-verify'] = true;
    const serverName = text(tls.serverName, 'tlsClientConfig.serverName');
    if (serverName) cluster['tls-server-name'] = serverName;
    const user: Obj = {};
    const certData = text(tls.certData, 'tlsClientConfig.certData');
    const keyData = text(tls.keyData, 'tlsClientConfig.keyData');
    if (certData) user['client-certificate-data'] = certData;
    if (keyData) user['client-key-data'] = keyData;
    const token = text(config.bearerToken, 'bearerToken');
    if (token) user.token = token;
    const username = text(config.username, 'username');
    const password = text(config.password, 'password');
    if (username !== undefined || password !== undefined) {
      user.username = username;
      user.password = password;
    }
    return JSON.stringify(singleContext(cluster, user));
  });
}

/**
 * A Cluster API kubeconfig Secret: `<cluster>-kubeconfig`, labelled cluster.x-k8s.io/cluster-name,
 * the kubeconfig under `value`. Other Secrets of the cluster (its CA, etcd, service-account keys)
 * carry the label too and are not sources: isCapiKubeconfigSecret tells them apart.
 */
export function fromCapiSecret(secret: SecretLike): SourceCluster {
  const id = ident(secret);
  const clusterName = secret.metadata?.labels?.[CAPI_CLUSTER_NAME_LABEL] ?? '';
  const base: SourceCluster = { kind: 'capi', ...id, clusterName };
  const value = field(secret, 'value');
  if (value === undefined) return { ...base, error: 'the Cluster API kubeconfig Secret has no key "value"' };
  return attempt(base, () => value);
}

/** Is this Secret the kubeconfig Secret of a Cluster API cluster (not its CA or etcd Secret)? */
export function isCapiKubeconfigSecret(secret: SecretLike): boolean {
  const cluster = secret.metadata?.labels?.[CAPI_CLUSTER_NAME_LABEL];
  return !!cluster && secret.metadata?.name === `${cluster}-kubeconfig`;
}

/**
 * A ClusterProfile: the server, CA, tls-server-name and insecure flag from its first
 * status.accessProviders entry (else the deprecated credentialProviders), the credential from the
 * Secret in its namespace labelled kiteline.io/clusterprofile=<profile name>: key `token` (a bearer
 * token), or key `kubeconfig` whose user (token, client certificate, username/password) is used
 * with the profile's server. That server must be the one the Secret pins (pinnedServer). File
 * paths (certificate-authority, tokenFile) and exec plugins are refused as everywhere.
 */
export function fromClusterProfile(profile: ClusterProfileLike, credentials: SecretLike | undefined): SourceCluster {
  const id = ident(profile);
  const base: SourceCluster = { kind: 'clusterprofile', ...id, clusterName: id.objectName };
  const providers = profile.status?.accessProviders?.length
    ? profile.status.accessProviders
    : (profile.status?.credentialProviders ?? []);
  const access = providers.find((p) => isObj(p?.cluster));
  if (!access?.cluster)
    return { ...base, error: 'the ClusterProfile has no status.accessProviders[].cluster (no server to reach)' };
  if (!credentials)
    return {
      ...base,
      error:
        `no Secret in namespace "${id.namespace}" labelled ` +
        `${CLUSTERPROFILE_CREDENTIALS_LABEL}=${id.objectName} holds its credential`,
    };
  return attempt(base, () => {
    const cluster: Obj = {};
    for (const key of [
      'server',
      'certificate-authority-data',
      'certificate-authority',
      'insecure-skip-tls-verify',
      'tls-server-name',
      'proxy-url',
    ]) {
      if (access.cluster![key] !== undefined) cluster[key] = access.cluster![key];
    }
    const token = field(credentials, 'token');
    const kubeconfig = field(credentials, 'kubeconfig');
    let user: Obj;
    if (token !== undefined && token.trim() !== '') {
      user = { token: token.trim() };
    } else if (kubeconfig !== undefined) {
      user = credentialUser(kubeconfig);
    } else {
      throw new KubeconfigError('the credential Secret has neither a "token" nor a "kubeconfig" key');
    }
    cluster.server = pinnedServer(credentials, kubeconfig, cluster.server);
    return JSON.stringify(singleContext(cluster, user));
  });
}

/** A URL compared as the connection uses it: host case, default port and trailing slashes aside. */
function comparable(text: string): URL | undefined {
  try {
    const url = new URL(text);
    if (url.protocol !== 'https:' && url.protocol !== 'http:') return undefined;
    url.pathname = url.pathname.replace(/\/+$/, '');
    return url;
  } catch {
    return undefined;
  }
}

/** A server for a message: scheme, host and path only (never a user, password or query). */
const shown = (url: URL) => `${url.origin}${url.pathname.replace(/\/+$/, '')}`;

/**
 * The server a ClusterProfile's credential may be sent to: the profile's status
 * is written by whoever may patch `clusterprofiles/status`, the credential by whoever may write
 * Secrets; so the Secret names the server it is for (key `server`, else the server of its
 * `kubeconfig`), and a status naming another one is not connected. Returns the pinned server.
 */
function pinnedServer(credentials: SecretLike, kubeconfig: string | undefined, statusServer: unknown): string {
  const secret = `${credentials.metadata?.namespace ?? ''}/${credentials.metadata?.name ?? ''}`;
  const keyed = field(credentials, 'server')?.trim();
  const pin = keyed || (kubeconfig !== undefined ? credentialServer(kubeconfig) : undefined);
  if (!pin)
    throw new KubeconfigError(
      `the credential Secret ${secret} pins no server: add the key "server" with the URL of the API server the ` +
        "credential is for (it must equal the ClusterProfile's status.accessProviders[].cluster.server)",
    );
  const pinned = comparable(pin);
  if (!pinned)
    throw new KubeconfigError(
      `the credential Secret ${secret}: ${keyed ? 'its key "server"' : "its kubeconfig's server"} ` +
        '(the server it pins) is not an http(s) URL',
    );
  const named = typeof statusServer === 'string' ? comparable(statusServer) : undefined;
  if (!named) throw new KubeconfigError("the ClusterProfile's status names no http(s) server");
  if (named.href !== pinned.href)
    throw new KubeconfigError(
      `the ClusterProfile's status names server ${shown(named)}, which is not the server its credential Secret ` +
        `${secret} pins ${shown(pinned)}: not connected (whoever may write the profile's status must not be able ` +
        'to send the credential elsewhere)',
    );
  return pin;
}

/** The server of a credential kubeconfig's current context (else its only cluster), if any. */
function credentialServer(text: string): string | undefined {
  const doc = parseKubeconfig(text);
  const clusters = (doc.clusters as unknown[] | undefined) ?? [];
  const contexts = (doc.contexts as unknown[] | undefined) ?? [];
  const current = contexts.find((c) => isObj(c) && c.name === doc['current-context']);
  const clusterName = isObj(current) && isObj(current.context) ? current.context.cluster : undefined;
  const entry =
    clusters.find((c) => isObj(c) && c.name === clusterName) ?? (clusters.length === 1 ? clusters[0] : undefined);
  const server = isObj(entry) && isObj(entry.cluster) ? entry.cluster.server : undefined;
  return typeof server === 'string' && server.trim() !== '' ? server.trim() : undefined;
}

/** The user of a credential kubeconfig's current context (else its only user), checked later. */
function credentialUser(text: string): Obj {
  const doc = parseKubeconfig(text);
  const users = (doc.users as unknown[] | undefined) ?? [];
  const contexts = (doc.contexts as unknown[] | undefined) ?? [];
  const current = contexts.find((c) => isObj(c) && c.name === doc['current-context']);
  const userName = isObj(current) && isObj(current.context) ? current.context.user : undefined;
  const entry = users.find((u) => isObj(u) && u.name === userName) ?? (users.length === 1 ? users[0] : undefined);
  if (!isObj(entry) || !isObj(entry.user)) throw new KubeconfigError('the credential kubeconfig names no user');
  return entry.user;
}

function singleContext(cluster: Obj, user: Obj): Obj {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'source', cluster }],
    users: [{ name: 'source', user }],
    contexts: [{ name: 'source', context: { cluster: 'source', user: 'source' } }],
    'current-context': 'source',
  };
}
