// Configuration of `kiteline serve`: read from flags and the environment and validated here, once.
// Flags win over environment variables; everything has a default a local run can live with.
import { existsSync, readFileSync } from 'node:fs';
import { isIP, type LookupFunction } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError } from './errors.js';

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** The repository (or installed package) root: crds/ and scripts/ live there. */
export const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface Config {
  /** Address and port the gateway listens on. */
  host: string;
  port: number;
  logLevel: string;
  /** Host-cluster kubeconfig file; undefined means the in-cluster service account. */
  kubeconfig: string | undefined;
  /** Namespace holding kiteline's custom resources and Secrets. */
  namespace: string;
  /** True when running in a pod (service-account files present). */
  inPod: boolean;
  /** Where the pod's service-account token, ca.crt and namespace are (tests point it elsewhere). */
  serviceAccountDir: string;
  /** Install or upgrade CRDs from crdDir at start-up when allowed. */
  installCrds: boolean;
  crdDir: string;
  /** Largest accepted request body (the API server's own limit is 3 MiB). */
  bodyLimitBytes: number;
  /** Session cookie lifetime. */
  sessionTtlSeconds: number;
  /** Absolute session lifetime from login: refreshes never renew a session past it. */
  sessionMaxLifetimeSeconds: number;
  /** How long a provider's user holding no role is kept after their last sign-in (auth/roleless-users.ts). */
  rolelessUserTtlSeconds: number;
  /** Marks the session cookie Secure (also set per request behind https). */
  secureCookies: boolean;
  /** Failed logins allowed per user and per address within loginWindowSeconds before 429. */
  loginMaxFailures: number;
  loginWindowSeconds: number;
  /** Password hashes (scrypt, one libuv thread each) running at once in the process. */
  passwordHashConcurrency: number;
  /** Fastify trustProxy: false (the socket's peer is the client) or the proxies' addresses/CIDRs. */
  trustProxy: false | string[];
  /** Cluster health probes: interval while healthy, connect timeout for upstream calls. */
  clusterProbeIntervalMs: number;
  upstreamConnectTimeoutMs: number;
  /**
   * Resolves the host names of cluster servers instead of DNS; never set from flags or the
   * environment, only by tests (no name resolves to a link-local address honestly there). Whatever
   * resolves, connections still refuse link-local and metadata addresses (refused-addresses.ts).
   */
  clusterLookup?: LookupFunction;
  /** GET /api/v1/image/tags: the registries it may reach on internal addresses, credentials, deadline. */
  imageRegistries: ImageRegistriesConfig;
  /** Helm releases (docs/helm.md): the helm binary, the longest write, chart repositories' deadline. */
  helm: HelmConfig;
  /** Identity of this replica (leader election holder id, logs). */
  replicaId: string;
  /** Serve GET /metrics without authentication (default: admin principals only). */
  metricsPublic: boolean;
  /** Also record each admin write as a core/v1 Event in the install namespace. */
  auditEvents: boolean;
  /** The durable audit trail (AuditChunks in the install namespace, docs/operations.md); undefined: off. */
  auditTrail?: AuditTrailConfig;
  /** Unauthenticated actions audited one by one per minute and replica; the rest go into one summary record. */
  auditUnauthenticatedPerMinute: number;
  /** Recording of terminal, exec and attach sessions (src/recording/, docs/sessions.md). */
  sessionRecording: RecordingConfig;
  /** Identical object GETs waiting at the same time share one upstream read (read-coalescer.ts). */
  coalesceReads: boolean;
  /** GETs and LISTs answered from watch caches of hot resources (docs/read-cache.md). */
  readCache: ReadCacheOptions;
  /** PUTs and PATCHes of one object go upstream one at a time (write-turns.ts). */
  writeTurns: boolean;
  /** Per caller and cluster: long-running requests (watches, deletes that wait) open at once, then 429. */
  maxWatchesPerPrincipal: number;
  /** Per caller and cluster: other requests in flight at once, then 429. */
  maxRequestsPerPrincipal: number;
  /** MCP tool calls one user or API key may make per minute on this replica, then a 429 tool error. */
  mcpToolCallsPerMinute: number;
  /** A client must send its request headers within this (slowloris), then its whole request within requestTimeoutMs. */
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  /** A connection on which nothing moves for this long is closed (watches and deletes that wait are exempt). */
  idleTimeoutMs: number;
  /** The gateway's URL as clients reach it (kubeconfigs point there); undefined: taken from each request. */
  externalUrl: string | undefined;
  /**
   * This replica's own URL as the other replicas reach it (`http://<pod IP>:8080`): an MCP session
   * opened here names it, so a POST of the session that reaches another replica is forwarded here.
   * Undefined: sessions are answered only by the replica that holds them.
   */
  peerUrl: string | undefined;
  /**
   * The path kiteline is published under behind a front end (`/kite`), or '' at the root: requests
   * under it lose it before routing (those without it are served too: a front end that strips it),
   * and every link kiteline makes (redirects, kubeconfigs, the UI's base) carries it.
   */
  basePath: string;
  /** A built Kite UI served at the base path (gateway/routes/ui.ts); undefined: kiteline serves only its API. */
  uiDir: string | undefined;
  /** Lifetime of a kubeconfig's token when the caller asks for none, and the most a caller may ask for. */
  kubeconfigTokenTtlSeconds: number;
  kubeconfigTokenMaxTtlSeconds: number;
  /** Unexpired kubeconfig tokens a user may hold; minting one more revokes the oldest. */
  kubeconfigTokensPerUser: number;
  /** How long an expired API key stays listed before it is deleted (host/expired-keys.ts). */
  expiredKeyRetentionSeconds: number;
  /** PEM of the CA of an https front end, embedded in kubeconfigs (certificate-authority-data). */
  kubeconfigCa: string | undefined;
  /** An https listener beside the http one (kubectl sends tokens only over https); undefined: none. */
  tls: TlsConfig | undefined;
  /** Where clusters are read from besides kiteline's Cluster objects: namespaces per source kind (docs/clusters.md). */
  clusterSources: ClusterSourcesConfig;
  /** Publish a ClusterProfile for each of kiteline's own clusters into this namespace; undefined: off. */
  publishClusterProfiles: string | undefined;
  /**
   * Sign-in against an LDAP directory (POST /api/auth/login/ldap) from the environment; undefined:
   * none (an LDAPSetting, when there is one, decides instead: docs/auth.md, "LDAP").
   */
  ldap: LdapConfig | undefined;
  /** The timeout and re-check interval of any directory, the environment's or an LDAPSetting's. */
  ldapTiming: LdapTiming;
}

export type LdapTiming = Pick<LdapConfig, 'timeoutMs' | 'recheckIntervalMs'>;

/** The namespaces each cluster source is read from; an empty list: that source is off. */
export interface ClusterSourcesConfig {
  argocd: string[];
  capi: string[];
  clusterprofile: string[];
}

const NAMESPACE_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const SOURCE_KINDS = ['argocd', 'capi', 'clusterprofile'] as const;

/**
 * KITELINE_CLUSTER_SOURCES / --cluster-sources: `kind=ns1,ns2;kind=ns3`, kinds argocd, capi,
 * clusterprofile; each off unless listed. E.g. `argocd=argocd;capi=capi-system,fleet`.
 */
export function clusterSources(name: string, raw: string | undefined): ClusterSourcesConfig {
  const sources: ClusterSourcesConfig = { argocd: [], capi: [], clusterprofile: [] };
  if (!raw || raw.trim() === '') return sources;
  for (const part of raw.split(';')) {
    if (part.trim() === '') continue;
    const eq = part.indexOf('=');
    const kind = (eq < 0 ? part : part.slice(0, eq)).trim();
    if (!(SOURCE_KINDS as readonly string[]).includes(kind)) {
      throw new ConfigError(`${name}: unknown source "${kind}" (use ${SOURCE_KINDS.join(', ')}), e.g. argocd=argocd`);
    }
    const namespaces = (eq < 0 ? '' : part.slice(eq + 1))
      .split(',')
      .map((ns) => ns.trim())
      .filter((ns) => ns !== '');
    if (namespaces.length === 0) throw new ConfigError(`${name}: ${kind} lists no namespace (${kind}=<namespace>,...)`);
    for (const ns of namespaces) {
      if (!NAMESPACE_NAME.test(ns)) throw new ConfigError(`${name}: "${ns}" is not a namespace name`);
    }
    const list = sources[kind as (typeof SOURCE_KINDS)[number]];
    for (const ns of namespaces) if (!list.includes(ns)) list.push(ns);
  }
  return sources;
}

function publishNamespace(name: string, raw: string | undefined): string | undefined {
  if (!raw || raw.trim() === '') return undefined;
  if (!NAMESPACE_NAME.test(raw.trim())) throw new ConfigError(`${name}: "${raw}" is not a namespace name`);
  return raw.trim();
}

/** A registry's API endpoint: host (lower case, IPv6 without brackets), port, and plain http or https. */
export interface RegistryEndpoint {
  host: string;
  port: number;
  http: boolean;
}

/** How kiteline asks registries for an image's tags (docs/tools.md, "Image tags"). */
export interface ImageRegistriesConfig {
  /**
   * Registries an admin allows on addresses outside the public internet (loopback, private, a
   * cluster's Services); every other registry, and every token server, must be public. Plain http
   * only for those listed with http://.
   */
  internal: RegistryEndpoint[];
  /** Secret (install namespace, type kubernetes.io/dockerconfigjson) with credentials per registry. */
  credentialsSecret: string;
  /** PEM of CAs trusted for registries besides the system's. */
  ca: string | undefined;
  /** The whole look-up (token, every page) gets this long. */
  timeoutMs: number;
  /** Resolves registry host names instead of DNS; never set from flags or the environment, only by tests. */
  lookup?: LookupFunction;
}

/**
 * A registry as an image or a docker config names it: `host`, `host:port`, `[v6]:port`, optionally
 * with `https://` or `http://` and a path (ignored, as in docker config's "https://index.docker.io/v1/").
 * undefined when it is none.
 */
export function registryEndpoint(text: string): RegistryEndpoint | undefined {
  const scheme = /^(https?):\/\//i.exec(text)?.[1]?.toLowerCase();
  let url: URL;
  try {
    url = new URL(scheme ? text : `https://${text}`);
  } catch {
    return undefined;
  }
  if (url.username || url.password || url.search || url.hash || url.hostname === '') return undefined;
  const http = scheme === 'http';
  const port = url.port === '' ? (http ? 80 : 443) : Number(url.port);
  return { host: url.hostname.replace(/^\[|\]$/g, '').toLowerCase(), port, http };
}

/**
 * KITELINE_IMAGE_REGISTRIES_INTERNAL and friends. The internal list is comma-separated registries
 * as images name them (`registry.kube-system.svc:5000`, `http://127.0.0.1:5000`).
 */
function imageRegistriesConfig(pick: (flag: string, envName: string) => string | undefined): ImageRegistriesConfig {
  const raw = pick('image-registries-internal', 'KITELINE_IMAGE_REGISTRIES_INTERNAL') ?? '';
  const internal = raw
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '')
    .map((entry) => {
      const endpoint = /^(https?:\/\/)?[^/]+$/i.test(entry) ? registryEndpoint(entry) : undefined;
      if (!endpoint)
        throw new ConfigError(
          `image-registries-internal: "${entry}" is not a registry (host, host:port or http://host:port)`,
        );
      return endpoint;
    });
  const secret = pick('image-registry-secret', 'KITELINE_IMAGE_REGISTRY_SECRET') || 'kiteline-registry-credentials';
  if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(secret))
    throw new ConfigError(`image-registry-secret: "${secret}" is not a Secret name`);
  return {
    internal,
    credentialsSecret: secret,
    ca: caFile('image-registry-ca-file', pick('image-registry-ca-file', 'KITELINE_IMAGE_REGISTRY_CA_FILE')),
    timeoutMs: integer(
      'image-registry-timeout-ms',
      pick('image-registry-timeout-ms', 'KITELINE_IMAGE_REGISTRY_TIMEOUT_MS'),
      10_000,
      100,
      120_000,
    ),
  };
}

export interface HelmConfig {
  /** The helm binary: a path, or a name on PATH (KITELINE_HELM; default `helm`). */
  binary: string;
  /** The longest a release write may wait (Helm's --timeout), seconds. */
  maxTimeoutSeconds: number;
  /** Chart repositories' answers (index, archive, tags) get this long. */
  repositoryTimeoutMs: number;
}

function helmConfig(pick: (flag: string, envName: string) => string | undefined): HelmConfig {
  return {
    binary: pick('helm', 'KITELINE_HELM') || 'helm',
    maxTimeoutSeconds: integer(
      'helm-max-timeout',
      pick('helm-max-timeout', 'KITELINE_HELM_MAX_TIMEOUT'),
      900,
      10,
      3600,
    ),
    repositoryTimeoutMs: integer(
      'chart-repository-timeout-ms',
      pick('chart-repository-timeout-ms', 'KITELINE_CHART_REPOSITORY_TIMEOUT_MS'),
      30_000,
      100,
      300_000,
    ),
  };
}

/** An LDAP directory users sign in against: bind as a service account, find the user, bind as them. */
export interface LdapConfig {
  /** ldap://host:port or ldaps://host:port. */
  url: string;
  /** Upgrade an ldap:// connection with StartTLS before binding. */
  startTls: boolean;
  /** PEM of the CA of the directory's certificate (ldaps or StartTLS), when not a public one. */
  ca: string | undefined;
  /** The service account's DN; its password is key `password` of Secret bindPasswordSecret. */
  bindDn: string;
  bindPasswordSecret: string;
  /** Where users are searched (subtree) and the filter, `{username}` standing for the escaped name. */
  userBase: string;
  userFilter: string;
  /** The attribute holding the username kiteline uses (the entered one when absent), and the display name. */
  usernameAttribute: string;
  nameAttribute: string;
  /** Where groups are searched (subtree; "" for none), the filter (`{dn}`, `{username}`), the name attribute. */
  groupBase: string;
  groupFilter: string;
  groupAttribute: string;
  timeoutMs: number;
  /** How often the leader looks every directory user up again (gone: revoked; groups refreshed). */
  recheckIntervalMs: number;
}

/** Session recording: off, on (best effort: a failure loses the recording, not the session), required. */
/** Cached reads (src/resources/cache/, docs/read-cache.md). */
export interface ReadCacheOptions {
  enabled: boolean;
  /** Reads of one resource within `hotWindowMs` that start its cache. */
  hotReads: number;
  hotWindowMs: number;
  /** A cache nobody read for this long stops. */
  idleMs: number;
  /** Per cluster, over all its caches. */
  maxObjects: number;
  maxBytes: number;
  /** How long a read waits for the cache to reach the freshness it needs before passing through. */
  waitMs: number;
  /** Least time between two checks of a collection's current resourceVersion (0: back to back). */
  checkIntervalMs: number;
  /** A consistent read whose answer is smaller than this goes to the cluster (its check would cost as much). */
  minConsistentBytes: number;
  /** How long the target's decision on a caller's read is kept (forgotten sooner on RBAC changes). */
  decisionTtlMs: number;
}

export type RecordingMode = 'off' | 'on' | 'required';

export interface RecordingConfig {
  mode: RecordingMode;
  /** Each live session's events are written as one SessionChunk this often (what a crash can lose). */
  flushIntervalMs: number;
  /** Event bytes one session records at most (then it is marked truncated). */
  maxSessionBytes: number;
  /** Retention: recordings that ended longer ago are deleted, and the oldest beyond maxTotalBytes stored. */
  maxAgeSeconds: number;
  maxTotalBytes: number;
  /** How often the leader deletes recordings past the retention. */
  pruneIntervalMs: number;
}

export interface AuditTrailConfig {
  /** Buffered records are written as one AuditChunk this often (what a crash can lose). */
  flushIntervalMs: number;
  /** Records per AuditChunk at most (a full chunk is written at once). */
  chunkSize: number;
  /** Retention: records older than this, and beyond the newest maxRecords, are deleted. */
  maxAgeSeconds: number;
  maxRecords: number;
  /** Retention of unauthenticated callers' records, counted apart so they never push others out. */
  unauthenticatedMaxRecords: number;
  /** How often the leader deletes chunks past the retention. */
  pruneIntervalMs: number;
  /** Each record is also POSTed there as an audit.k8s.io/v1 EventList; undefined: no export. */
  webhookUrl: string | undefined;
  /** PEM of the CA that signed the webhook's certificate (https), when not a public one. */
  webhookCa: string | undefined;
}

export interface TlsConfig {
  port: number;
  /** PEM certificate chain and key files; undefined: a self-signed certificate made at start-up. */
  certFile: string | undefined;
  keyFile: string | undefined;
}

type Source = Record<string, string | undefined>;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** Parses `--name value`, `--name=value` and boolean `--flag` / `--no-flag` into a map. */
export function parseFlags(argv: string[]): Source {
  const flags: Source = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('--')) throw new ConfigError(`unexpected argument: ${arg}`);
    const eq = arg.indexOf('=');
    if (eq > 0) {
      flags[arg.slice(2, eq)] = arg.slice(eq + 1);
    } else if (arg.startsWith('--no-')) {
      flags[arg.slice(5)] = 'false';
    } else if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) {
      flags[arg.slice(2)] = argv[++i];
    } else {
      flags[arg.slice(2)] = 'true';
    }
  }
  return flags;
}

function integer(name: string, raw: string | undefined, fallback: number, min: number, max: number): number {
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`);
  return value;
}

function boolean(name: string, raw: string | undefined, fallback: boolean): boolean {
  if (raw === undefined || raw === '') return fallback;
  if (['true', '1', 'yes'].includes(raw)) return true;
  if (['false', '0', 'no'].includes(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

/** proxy-addr's names for address ranges (Fastify's trustProxy accepts them next to CIDRs). */
const PROXY_RANGE_NAMES = ['loopback', 'linklocal', 'uniquelocal'];

/**
 * Which proxies' X-Forwarded-* headers to believe: none (default: the socket's peer is the
 * client) or those connecting from the given addresses and CIDRs. `true` (believe anyone) and hop
 * counts (believe whoever connects, as far as N hops; Fastify 5 ignores them) are refused: they
 * let a client that reaches the gateway directly pick its own address.
 */
function trustProxy(name: string, raw: string | undefined): false | string[] {
  if (raw === undefined || raw === '' || raw === 'false') return false;
  const ranges = PROXY_RANGE_NAMES.join(', ');
  const rule = `${name} must be false or a comma-separated list of proxy addresses or CIDRs (or ${ranges})`;
  if (raw === 'true' || /^\d+$/.test(raw))
    throw new ConfigError(`${rule}; ${raw} would let a client choose its own address`);
  const entries = raw.split(',').map((entry) => entry.trim());
  for (const entry of entries) {
    const [address = '', prefix, ...rest] = entry.split('/');
    const family = isIP(address);
    const prefixOk = prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 6 ? 128 : 32));
    if (!PROXY_RANGE_NAMES.includes(entry) && (family === 0 || !prefixOk || rest.length > 0)) {
      throw new ConfigError(`${rule}, got "${entry}"`);
    }
  }
  return entries;
}

/** An http(s) URL without query, fragment or trailing slash, or undefined. */
function externalUrl(name: string, raw: string | undefined): string | undefined {
  if (raw === undefined || raw === '') return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be an http or https URL, got "${raw}"`);
  }
  if (!['http:', 'https:'].includes(url.protocol) || url.search || url.hash || url.username || url.password) {
    throw new ConfigError(`${name} must be an http or https URL without credentials, query or fragment, got "${raw}"`);
  }
  return url.toString().replace(/\/+$/, '');
}

/** The paths of kiteline's own API: neither a UI build (gateway/routes/ui.ts) nor a base path takes them. */
export const KITELINE_PATHS = ['/api', '/k8s', '/mcp', '/metrics', '/healthz', '/readyz', '/docs'];

/** `/kite`, `/tools/kite`: segments of unreserved characters only, never `.` or `..`. */
const BASE_PATH = /^(\/(?!\.{1,2}(\/|$))[A-Za-z0-9._~-]+)+$/;

/**
 * KITELINE_BASE_PATH: `/kite` (a trailing slash is dropped); unset, the external URL's path. When
 * both are set they must agree: links would point where requests never arrive.
 */
function basePath(name: string, raw: string | undefined, external: string | undefined): string {
  const externalPath = external === undefined ? '' : new URL(external).pathname.replace(/\/+$/, '');
  const given = raw === undefined || raw === '' ? undefined : raw.replace(/\/+$/, '');
  if (given !== undefined && external !== undefined && externalPath !== given) {
    throw new ConfigError(`${name} "${given || '/'}" and external-url's path "${externalPath || '/'}" must agree`);
  }
  const path = given ?? externalPath;
  if (path === '') return '';
  const source = given === undefined ? "external-url's path" : name;
  if (!BASE_PATH.test(path)) {
    throw new ConfigError(`${source} must be a URL path such as /kite (letters, digits, . _ ~ -), got "${path}"`);
  }
  // Requests without the base path are served too: under /api, kiteline's own /api would be lost.
  const first = `/${path.split('/')[1]}`;
  if (KITELINE_PATHS.includes(first)) {
    throw new ConfigError(`${source} must not begin with one of kiteline's own paths (${first}), got "${path}"`);
  }
  return path;
}

/** KITELINE_UI_DIR: a directory holding a built UI's index.html. */
function uiDir(name: string, raw: string | undefined): string | undefined {
  if (raw === undefined || raw === '') return undefined;
  const dir = resolve(raw);
  if (!existsSync(join(dir, 'index.html'))) {
    throw new ConfigError(`${name} must be a built UI's directory, with its index.html: none in "${dir}"`);
  }
  return dir;
}

/** A PEM certificate file's text, or undefined. */
function caFile(name: string, path: string | undefined): string | undefined {
  if (path === undefined || path === '') return undefined;
  if (!existsSync(path)) throw new ConfigError(`${name}: file not found: ${path}`);
  const pem = readFileSync(path, 'utf8');
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) throw new ConfigError(`${name}: ${path} holds no PEM certificate`);
  return pem;
}

/**
 * The kubeconfig token lifetimes (seconds; the default must not exceed the maximum), how many a user may hold, and how
 * long expired keys stay listed.
 */
function kubeconfigTokenLimits(
  pick: (flag: string, envName: string) => string | undefined,
): Pick<
  Config,
  | 'kubeconfigTokenTtlSeconds'
  | 'kubeconfigTokenMaxTtlSeconds'
  | 'kubeconfigTokensPerUser'
  | 'expiredKeyRetentionSeconds'
> {
  const max = integer(
    'kubeconfig-token-max-ttl',
    pick('kubeconfig-token-max-ttl', 'KITELINE_KUBECONFIG_TOKEN_MAX_TTL'),
    30 * 24 * 3600,
    60,
    365 * 24 * 3600,
  );
  const ttl = integer(
    'kubeconfig-token-ttl',
    pick('kubeconfig-token-ttl', 'KITELINE_KUBECONFIG_TOKEN_TTL'),
    Math.min(12 * 3600, max),
    60,
    365 * 24 * 3600,
  );
  if (ttl > max)
    throw new ConfigError(`kubeconfig-token-ttl (${ttl}) must not be longer than kubeconfig-token-max-ttl (${max})`);
  const retention = integer(
    'expired-key-retention',
    pick('expired-key-retention', 'KITELINE_EXPIRED_KEY_RETENTION'),
    24 * 3600,
    0,
    365 * 24 * 3600,
  );
  const perUser = integer(
    'kubeconfig-tokens-per-user',
    pick('kubeconfig-tokens-per-user', 'KITELINE_KUBECONFIG_TOKENS_PER_USER'),
    10,
    1,
    1000,
  );
  return {
    kubeconfigTokenTtlSeconds: ttl,
    kubeconfigTokenMaxTtlSeconds: max,
    kubeconfigTokensPerUser: perUser,
    expiredKeyRetentionSeconds: retention,
  };
}

/** The https listener: a port, and a certificate and key given together or not at all. */
function tlsConfig(pick: (flag: string, envName: string) => string | undefined): TlsConfig | undefined {
  const rawPort = pick('tls-port', 'KITELINE_TLS_PORT');
  const certFile = pick('tls-cert-file', 'KITELINE_TLS_CERT_FILE') || undefined;
  const keyFile = pick('tls-key-file', 'KITELINE_TLS_KEY_FILE') || undefined;
  if ((certFile === undefined) !== (keyFile === undefined))
    throw new ConfigError('tls-cert-file and tls-key-file go together: set both or neither');
  if (rawPort === undefined || rawPort === '') {
    if (certFile) throw new ConfigError('tls-cert-file needs tls-port: the port of the https listener');
    return undefined;
  }
  for (const [name, path] of [
    ['tls-cert-file', certFile],
    ['tls-key-file', keyFile],
  ] as const) {
    if (path !== undefined && !existsSync(path)) throw new ConfigError(`${name}: file not found: ${path}`);
  }
  return { port: integer('tls-port', rawPort, 8443, 0, 65535), certFile, keyFile };
}

/** The audit trail's settings, or undefined when it is off (KITELINE_AUDIT_TRAIL=false). */
function auditTrailConfig(pick: (flag: string, envName: string) => string | undefined): AuditTrailConfig | undefined {
  if (!boolean('audit-trail', pick('audit-trail', 'KITELINE_AUDIT_TRAIL'), true)) return undefined;
  const rawUrl = pick('audit-webhook-url', 'KITELINE_AUDIT_WEBHOOK_URL') || undefined;
  if (rawUrl !== undefined) {
    let url: URL | undefined;
    try {
      url = new URL(rawUrl);
    } catch {
      url = undefined;
    }
    // Never echo the value: a webhook URL may carry a token.
    if (!url || !['http:', 'https:'].includes(url.protocol) || url.username || url.password) {
      throw new ConfigError('audit-webhook-url must be an http or https URL without user or password');
    }
  }
  return {
    flushIntervalMs: integer(
      'audit-flush-interval-ms',
      pick('audit-flush-interval-ms', 'KITELINE_AUDIT_FLUSH_INTERVAL_MS'),
      2000,
      100,
      60_000,
    ),
    chunkSize: integer('audit-chunk-size', pick('audit-chunk-size', 'KITELINE_AUDIT_CHUNK_SIZE'), 500, 1, 5000),
    maxAgeSeconds: integer(
      'audit-max-age',
      pick('audit-max-age', 'KITELINE_AUDIT_MAX_AGE'),
      30 * 24 * 3600,
      60,
      10 * 365 * 24 * 3600,
    ),
    maxRecords: integer(
      'audit-max-records',
      pick('audit-max-records', 'KITELINE_AUDIT_MAX_RECORDS'),
      100_000,
      1,
      10_000_000,
    ),
    unauthenticatedMaxRecords: integer(
      'audit-unauthenticated-max-records',
      pick('audit-unauthenticated-max-records', 'KITELINE_AUDIT_UNAUTHENTICATED_MAX_RECORDS'),
      10_000,
      0,
      10_000_000,
    ),
    pruneIntervalMs: integer(
      'audit-prune-interval-ms',
      pick('audit-prune-interval-ms', 'KITELINE_AUDIT_PRUNE_INTERVAL_MS'),
      60_000,
      100,
      3_600_000,
    ),
    webhookUrl: rawUrl,
    webhookCa: caFile('audit-webhook-ca-file', pick('audit-webhook-ca-file', 'KITELINE_AUDIT_WEBHOOK_CA_FILE')),
  };
}

/** Cached reads: on or off, the hot-list rule, idle stop, per-cluster bounds, waits, decision lifetime. */
function readCacheConfig(pick: (flag: string, envName: string) => string | undefined): ReadCacheOptions {
  const number = (flag: string, fallback: number, min: number, max: number) =>
    integer(flag, pick(flag, `KITELINE_${flag.toUpperCase().replaceAll('-', '_')}`), fallback, min, max);
  return {
    enabled: boolean('read-cache', pick('read-cache', 'KITELINE_READ_CACHE'), true),
    hotReads: number('read-cache-hot-reads', 2, 1, 1000),
    hotWindowMs: number('read-cache-hot-window-ms', 10_000, 100, 3_600_000),
    idleMs: number('read-cache-idle-ms', 120_000, 1000, 86_400_000),
    maxObjects: number('read-cache-max-objects', 100_000, 1, 10_000_000),
    maxBytes: number('read-cache-max-mib', 256, 1, 65_536) * 1024 * 1024,
    waitMs: number('read-cache-wait-ms', 50, 0, 10_000),
    checkIntervalMs: number('read-cache-check-interval-ms', 0, 0, 10_000),
    minConsistentBytes: number('read-cache-min-consistent-kib', 64, 0, 1024 * 1024) * 1024,
    decisionTtlMs: number('read-cache-decision-ttl-ms', 5000, 0, 60_000),
  };
}

const RECORDING_MODES: readonly RecordingMode[] = ['off', 'on', 'required'];

/** Session recording: the mode (off, on, required), flush interval, per-session limit, retention. */
function sessionRecordingConfig(pick: (flag: string, envName: string) => string | undefined): RecordingConfig {
  const mode = (pick('session-recording', 'KITELINE_SESSION_RECORDING') || 'on') as RecordingMode;
  if (!RECORDING_MODES.includes(mode))
    throw new ConfigError(`session-recording must be one of ${RECORDING_MODES.join(', ')}, got "${mode}"`);
  const MiB = 1024 * 1024;
  return {
    mode,
    flushIntervalMs: integer(
      'session-recording-flush-interval-ms',
      pick('session-recording-flush-interval-ms', 'KITELINE_SESSION_RECORDING_FLUSH_INTERVAL_MS'),
      5000,
      100,
      60_000,
    ),
    maxSessionBytes:
      integer(
        'session-recording-max-session-mib',
        pick('session-recording-max-session-mib', 'KITELINE_SESSION_RECORDING_MAX_SESSION_MIB'),
        64,
        1,
        4096,
      ) * MiB,
    maxAgeSeconds: integer(
      'session-recording-max-age',
      pick('session-recording-max-age', 'KITELINE_SESSION_RECORDING_MAX_AGE'),
      30 * 24 * 3600,
      10,
      10 * 365 * 24 * 3600,
    ),
    maxTotalBytes:
      integer(
        'session-recording-max-total-mib',
        pick('session-recording-max-total-mib', 'KITELINE_SESSION_RECORDING_MAX_TOTAL_MIB'),
        1024,
        1,
        1024 * 1024,
      ) * MiB,
    pruneIntervalMs: integer(
      'session-recording-prune-interval-ms',
      pick('session-recording-prune-interval-ms', 'KITELINE_SESSION_RECORDING_PRUNE_INTERVAL_MS'),
      60_000,
      100,
      3_600_000,
    ),
  };
}

function inPodNamespace(serviceAccountDir: string): string | undefined {
  const file = join(serviceAccountDir, 'namespace');
  return existsSync(file) ? readFileSync(file, 'utf8').trim() : undefined;
}

/** The HTTP server's timeouts; the headers must be due before the whole request is. */
function serverTimeouts(
  pick: (flag: string, envName: string) => string | undefined,
): Pick<Config, 'headersTimeoutMs' | 'requestTimeoutMs' | 'idleTimeoutMs'> {
  const headersTimeoutMs = integer(
    'headers-timeout-ms',
    pick('headers-timeout-ms', 'KITELINE_HEADERS_TIMEOUT_MS'),
    10_000,
    100,
    600_000,
  );
  const requestTimeoutMs = integer(
    'request-timeout-ms',
    pick('request-timeout-ms', 'KITELINE_REQUEST_TIMEOUT_MS'),
    60_000,
    100,
    3_600_000,
  );
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(
      `headers-timeout-ms (${headersTimeoutMs}) must not be longer than request-timeout-ms (${requestTimeoutMs})`,
    );
  }
  const idleTimeoutMs = integer(
    'idle-timeout-ms',
    pick('idle-timeout-ms', 'KITELINE_IDLE_TIMEOUT_MS'),
    120_000,
    1000,
    3_600_000,
  );
  return { headersTimeoutMs, requestTimeoutMs, idleTimeoutMs };
}

/** Builds the one validated Config from command-line flags and the environment. */
export function loadConfig(argv: string[] = [], env: Source = process.env): Config {
  const flags = parseFlags(argv);
  const pick = (flag: string, envName: string) => flags[flag] ?? env[envName];

  const serviceAccountDir = env.KITELINE_SERVICE_ACCOUNT_DIR || SERVICE_ACCOUNT_DIR;
  const podNamespace = env.KUBERNETES_SERVICE_HOST ? inPodNamespace(serviceAccountDir) : undefined;
  const inPod = podNamespace !== undefined;
  const kubeconfig = pick('kubeconfig', 'KUBECONFIG') || undefined;
  if (!kubeconfig && !inPod) {
    throw new ConfigError(
      'no host cluster: set KUBECONFIG or --kubeconfig, or run in a pod (make run starts an embedded one)',
    );
  }
  if (kubeconfig && !existsSync(kubeconfig.split(':')[0])) {
    throw new ConfigError(`kubeconfig file not found: ${kubeconfig}`);
  }

  const external = externalUrl('external-url', pick('external-url', 'KITELINE_EXTERNAL_URL'));
  const namespace = pick('namespace', 'KITELINE_NAMESPACE') || podNamespace || 'kiteline-system';
  if (!NAMESPACE_NAME.test(namespace)) {
    throw new ConfigError(`namespace must be a DNS label, got "${namespace}"`);
  }
  const logLevel = pick('log-level', 'LOG_LEVEL') || 'info';
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`log level must be one of ${LOG_LEVELS.join(', ')}`);

  return {
    host: pick('host', 'HOST') || (inPod ? '0.0.0.0' : '127.0.0.1'),
    port: integer('port', pick('port', 'PORT'), 8080, 0, 65535),
    logLevel,
    kubeconfig,
    namespace,
    inPod,
    serviceAccountDir,
    installCrds: boolean('install-crds', pick('install-crds', 'KITELINE_INSTALL_CRDS'), true),
    crdDir: pick('crd-dir', 'KITELINE_CRD_DIR') || join(PACKAGE_ROOT, 'crds'),
    bodyLimitBytes: integer(
      'body-limit',
      pick('body-limit', 'KITELINE_BODY_LIMIT'),
      3 * 1024 * 1024,
      1024,
      64 * 1024 * 1024,
    ),
    sessionTtlSeconds: integer(
      'session-ttl',
      pick('session-ttl', 'KITELINE_SESSION_TTL'),
      24 * 3600,
      60,
      30 * 24 * 3600,
    ),
    sessionMaxLifetimeSeconds: integer(
      'session-max-lifetime',
      pick('session-max-lifetime', 'KITELINE_SESSION_MAX_LIFETIME'),
      7 * 24 * 3600,
      1,
      365 * 24 * 3600,
    ),
    rolelessUserTtlSeconds: integer(
      'roleless-user-ttl',
      pick('roleless-user-ttl', 'KITELINE_ROLELESS_USER_TTL'),
      24 * 3600,
      1,
      365 * 24 * 3600,
    ),
    secureCookies: boolean('secure-cookies', pick('secure-cookies', 'KITELINE_SECURE_COOKIES'), false),
    loginMaxFailures: integer(
      'login-max-failures',
      pick('login-max-failures', 'KITELINE_LOGIN_MAX_FAILURES'),
      10,
      1,
      10000,
    ),
    loginWindowSeconds: integer('login-window', pick('login-window', 'KITELINE_LOGIN_WINDOW'), 300, 1, 86400),
    passwordHashConcurrency: integer(
      'password-hash-concurrency',
      pick('password-hash-concurrency', 'KITELINE_PASSWORD_HASH_CONCURRENCY'),
      2,
      1,
      64,
    ),
    trustProxy: trustProxy('trust-proxy', pick('trust-proxy', 'KITELINE_TRUST_PROXY')),
    clusterProbeIntervalMs: integer(
      'probe-interval-ms',
      pick('probe-interval-ms', 'KITELINE_PROBE_INTERVAL_MS'),
      5000,
      100,
      600000,
    ),
    upstreamConnectTimeoutMs: integer(
      'connect-timeout-ms',
      pick('connect-timeout-ms', 'KITELINE_CONNECT_TIMEOUT_MS'),
      5000,
      100,
      120000,
    ),
    imageRegistries: imageRegistriesConfig(pick),
    helm: helmConfig(pick),
    replicaId: env.POD_NAME || env.HOSTNAME || `kiteline-${process.pid}`,
    metricsPublic: boolean('metrics-public', pick('metrics-public', 'KITELINE_METRICS_PUBLIC'), false),
    auditEvents: boolean('audit-events', pick('audit-events', 'KITELINE_AUDIT_EVENTS'), false),
    auditTrail: auditTrailConfig(pick),
    sessionRecording: sessionRecordingConfig(pick),
    auditUnauthenticatedPerMinute: integer(
      'audit-unauthenticated-per-minute',
      pick('audit-unauthenticated-per-minute', 'KITELINE_AUDIT_UNAUTHENTICATED_PER_MINUTE'),
      60,
      0,
      1_000_000,
    ),
    coalesceReads: boolean('coalesce-reads', pick('coalesce-reads', 'KITELINE_COALESCE_READS'), true),
    readCache: readCacheConfig(pick),
    writeTurns: boolean('write-turns', pick('write-turns', 'KITELINE_WRITE_TURNS'), true),
    maxWatchesPerPrincipal: integer(
      'max-watches-per-principal',
      pick('max-watches-per-principal', 'KITELINE_MAX_WATCHES_PER_PRINCIPAL'),
      100,
      1,
      100_000,
    ),
    maxRequestsPerPrincipal: integer(
      'max-requests-per-principal',
      pick('max-requests-per-principal', 'KITELINE_MAX_REQUESTS_PER_PRINCIPAL'),
      64,
      1,
      100_000,
    ),
    mcpToolCallsPerMinute: integer(
      'mcp-tool-calls-per-minute',
      pick('mcp-tool-calls-per-minute', 'KITELINE_MCP_TOOL_CALLS_PER_MINUTE'),
      300,
      1,
      10_000,
    ),
    ...serverTimeouts(pick),
    externalUrl: external,
    peerUrl: externalUrl('peer-url', pick('peer-url', 'KITELINE_PEER_URL')),
    basePath: basePath('base-path', pick('base-path', 'KITELINE_BASE_PATH'), external),
    uiDir: uiDir('ui-dir', pick('ui-dir', 'KITELINE_UI_DIR')),
    ...kubeconfigTokenLimits(pick),
    kubeconfigCa: caFile('kubeconfig-ca-file', pick('kubeconfig-ca-file', 'KITELINE_KUBECONFIG_CA_FILE')),
    tls: tlsConfig(pick),
    clusterSources: clusterSources('cluster-sources', pick('cluster-sources', 'KITELINE_CLUSTER_SOURCES')),
    publishClusterProfiles: publishNamespace(
      'publish-clusterprofiles',
      pick('publish-clusterprofiles', 'KITELINE_PUBLISH_CLUSTERPROFILES'),
    ),
    ldap: ldapConfig(pick),
    ldapTiming: ldapTiming(pick),
  };
}

/**
 * A loopback host (a URL's hostname): where plain connections are allowed, an http OIDC issuer or
 * an ldap:// directory without StartTLS (a test, or a developer's own provider).
 */
export function isLoopbackHost(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}

/** KITELINE_LDAP_TIMEOUT_MS and KITELINE_LDAP_RECHECK_INTERVAL (seconds). */
function ldapTiming(pick: (flag: string, envName: string) => string | undefined): LdapTiming {
  return {
    timeoutMs: integer('ldap-timeout-ms', pick('ldap-timeout-ms', 'KITELINE_LDAP_TIMEOUT_MS'), 10_000, 100, 120_000),
    recheckIntervalMs:
      integer(
        'ldap-recheck-interval',
        pick('ldap-recheck-interval', 'KITELINE_LDAP_RECHECK_INTERVAL'),
        300,
        1,
        86_400,
      ) * 1000,
  };
}

/**
 * The rules of a directory's address, the environment's and an LDAPSetting's alike (`names` are
 * the fields as the caller calls them): an ldap:// or ldaps:// URL without a path; StartTLS only on
 * ldap://; and, since every user's password crosses that connection, never in clear text beyond
 * this machine (ldap:// without StartTLS only on loopback). What is wrong, or undefined.
 */
export function ldapAddressProblem(
  url: string,
  startTls: boolean,
  names: { url: string; startTls: string } = { url: 'ldap-url', startTls: 'ldap-start-tls' },
): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `${names.url} must be an ldap:// or ldaps:// URL, got "${url}"`;
  }
  if (!['ldap:', 'ldaps:'].includes(parsed.protocol) || parsed.pathname.replace(/^\/$/, '') || parsed.search)
    return `${names.url} must be an ldap:// or ldaps:// URL without a path, got "${url}"`;
  if (!parsed.hostname || parsed.username || parsed.password || parsed.hash)
    return `${names.url} must name a host, without credentials or a #`;
  if (startTls && parsed.protocol === 'ldaps:') return `${names.startTls} is for ldap:// URLs (ldaps is TLS already)`;
  if (parsed.protocol === 'ldap:' && !startTls && !isLoopbackHost(parsed.hostname))
    return (
      `${names.url}: ldap:// without StartTLS would send passwords in clear text; use ldaps:// or turn ` +
      `${names.startTls} on (only a directory on loopback may go without)`
    );
  return undefined;
}

/** KITELINE_LDAP_*: undefined unless KITELINE_LDAP_URL is set. */
function ldapConfig(pick: (flag: string, envName: string) => string | undefined): LdapConfig | undefined {
  const value = (flag: string, fallback = '') =>
    pick(`ldap-${flag}`, `KITELINE_LDAP_${flag.toUpperCase().replace(/-/g, '_')}`) || fallback;
  const url = value('url');
  if (!url) return undefined;
  const startTls = boolean('ldap-start-tls', pick('ldap-start-tls', 'KITELINE_LDAP_START_TLS'), false);
  const problem = ldapAddressProblem(url, startTls);
  if (problem) throw new ConfigError(problem);
  const bindDn = value('bind-dn');
  const userBase = value('user-base');
  if (!bindDn || !userBase) throw new ConfigError('ldap-url needs ldap-bind-dn and ldap-user-base too');
  const userFilter = value('user-filter', '(uid={username})');
  if (!userFilter.includes('{username}')) throw new ConfigError('ldap-user-filter must contain {username}');
  return {
    url,
    startTls,
    ca: caFile('ldap-ca-file', pick('ldap-ca-file', 'KITELINE_LDAP_CA_FILE')),
    bindDn,
    bindPasswordSecret: value('bind-secret', 'kiteline-ldap-bind'),
    userBase,
    userFilter,
    usernameAttribute: value('username-attribute', 'uid'),
    nameAttribute: value('name-attribute', 'cn'),
    groupBase: value('group-base'),
    groupFilter: value('group-filter', '(member={dn})'),
    groupAttribute: value('group-attribute', 'cn'),
    ...ldapTiming(pick),
  };
}
