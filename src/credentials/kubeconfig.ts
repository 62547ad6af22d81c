// Kubeconfig parsing and sanitizing for registered clusters. A kubeconfig arrives from a client
// (create, update, import) or from a Secret applied with kubectl; before the gateway uses or
// stores it, it is reduced to one context with inline credentials only. Anything that would run
// code or read files on the gateway (exec and auth-provider plugins, tokenFile, client-certificate,
// client-key, certificate-authority paths) is refused with the reason, as are non-http(s) servers
// and certificates or keys that do not parse (they could never connect).
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { parse, stringify } from 'yaml';
import { REFUSED_WHY, refusedAddress } from './refused-addresses.js';

/** A kubeconfig that cannot be used, with a message fit for a 400 answer. */
export class KubeconfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KubeconfigError';
  }
}

/** The inline, file-free connection settings of one context. */
export interface ClusterCredentials {
  server: string;
  caData?: string; // base64 PEM, as in certificate-authority-data
  insecureSkipTlsVerify: boolean;
  tlsServerName?: string;
  clientCertificateData?: string;
  clientKeyData?: string;
  token?: string;
  username?: string;
  password?: string;
}

/** One usable context: its name and a single-context kubeconfig holding only what is needed. */
export interface SanitizedContext {
  context: string;
  credentials: ClusterCredentials;
  /** A kubeconfig YAML with exactly this context, its cluster and its user. */
  kubeconfig: string;
}

type Obj = Record<string, unknown>;

const FORBIDDEN_USER_FIELDS: Record<string, string> = {
  exec:
    'exec credential plugins are not allowed (they would run a program on the gateway); ' +
    'use a service-account token or client certificate',
  'auth-provider': 'auth-provider plugins are not allowed; use a service-account token or client certificate',
  tokenFile: 'tokenFile is a file path on the gateway; put the token inline (token)',
  'client-certificate': 'client-certificate is a file path on the gateway; use client-certificate-data',
  'client-key': 'client-key is a file path on the gateway; use client-key-data',
  as: 'impersonation in the kubeconfig (as) is not supported; use the cluster option impersonate',
  'as-uid': 'impersonation in the kubeconfig (as-uid) is not supported',
  'as-groups': 'impersonation in the kubeconfig (as-groups) is not supported',
  'as-user-extra': 'impersonation in the kubeconfig (as-user-extra) is not supported',
};

const FORBIDDEN_CLUSTER_FIELDS: Record<string, string> = {
  'certificate-authority': 'certificate-authority is a file path on the gateway; use certificate-authority-data',
  'proxy-url': 'proxy-url is not supported',
};

function isObj(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function optionalString(where: string, field: string, value: unknown): string | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') throw new KubeconfigError(`${where}: ${field} must be a string`);
  return value;
}

function base64Field(where: string, field: string, value: unknown): string | undefined {
  const text = optionalString(where, field, value);
  if (text === undefined) return undefined;
  const compact = text.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(compact)) throw new KubeconfigError(`${where}: ${field} is not base64`);
  return compact;
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/** Base64 of one or more PEM certificates, each of which parses; else KubeconfigError (never echoing the data). */
function checkCertificates(where: string, field: string, base64: string): void {
  const blocks = Buffer.from(base64, 'base64').toString('utf8').match(PEM_CERTIFICATE) ?? [];
  if (blocks.length === 0) throw new KubeconfigError(`${where}: ${field} holds no PEM certificate`);
  for (const block of blocks) {
    try {
      new X509Certificate(block);
    } catch {
      throw new KubeconfigError(`${where}: ${field} holds a PEM certificate that does not parse`);
    }
  }
}

/** Base64 of a PEM private key that parses; else KubeconfigError (never echoing the data). */
function checkPrivateKey(where: string, field: string, base64: string): void {
  try {
    createPrivateKey({ key: Buffer.from(base64, 'base64'), format: 'pem' });
  } catch {
    throw new KubeconfigError(`${where}: ${field} holds no PEM private key that parses`);
  }
}

/** Parses kubeconfig YAML (or JSON) into an object, or throws KubeconfigError. */
export function parseKubeconfig(text: string): Obj {
  if (typeof text !== 'string' || text.trim() === '') throw new KubeconfigError('kubeconfig is empty');
  let doc: unknown;
  try {
    doc = parse(text, { maxAliasCount: 50 });
  } catch (err) {
    const first = String((err as Error).message ?? err).split('\n')[0];
    throw new KubeconfigError(`kubeconfig is not valid YAML: ${first}`);
  }
  if (!isObj(doc)) throw new KubeconfigError('kubeconfig must be a YAML mapping (apiVersion: v1, kind: Config)');
  if (doc.kind !== undefined && doc.kind !== 'Config')
    throw new KubeconfigError(`kubeconfig kind must be Config, got ${JSON.stringify(doc.kind)}`);
  for (const list of ['clusters', 'users', 'contexts']) {
    if (doc[list] !== undefined && doc[list] !== null && !Array.isArray(doc[list])) {
      throw new KubeconfigError(`kubeconfig ${list} must be a list`);
    }
  }
  return doc;
}

function namedEntries(
  doc: Obj,
  list: 'clusters' | 'users' | 'contexts',
  inner: 'cluster' | 'user' | 'context',
): Map<string, Obj> {
  const entries = new Map<string, Obj>();
  for (const entry of (doc[list] as unknown[] | undefined) ?? []) {
    if (!isObj(entry) || typeof entry.name !== 'string' || entry.name === '') {
      throw new KubeconfigError(`kubeconfig ${list}: every entry needs a name`);
    }
    const body = entry[inner] ?? {};
    if (!isObj(body)) throw new KubeconfigError(`kubeconfig ${list} "${entry.name}": ${inner} must be a mapping`);
    entries.set(entry.name, body);
  }
  return entries;
}

/** Context names of a kubeconfig, in file order, and its current context ("" when unset). */
export function listContexts(text: string): { contexts: string[]; current: string } {
  const doc = parseKubeconfig(text);
  const contexts = [...namedEntries(doc, 'contexts', 'context').keys()];
  const current = typeof doc['current-context'] === 'string' ? doc['current-context'] : '';
  return { contexts, current };
}

function sanitizeServer(where: string, value: unknown): string {
  const server = optionalString(where, 'server', value);
  if (!server) throw new KubeconfigError(`${where}: server is missing`);
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    // Not echoed: a mistyped server can carry a token or password (user:pass@host).
    throw new KubeconfigError(`${where}: server is not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    // The scheme is named only when it looks like one ("token:..." parses as a scheme too).
    const scheme = url.protocol.replace(/:$/, '');
    throw new KubeconfigError(
      `${where}: server must be an http(s) URL, got ${/^[a-z]{1,10}$/.test(scheme) ? scheme : 'another scheme'}`,
    );
  }
  if (url.username || url.password) throw new KubeconfigError(`${where}: server URL must not carry credentials`);
  if (url.search || url.hash) throw new KubeconfigError(`${where}: server URL must not carry a query or fragment`);
  // The parsed host: the URL parser has already made 0xa9fea9fe or [::ffff:169.254.169.254] one
  // canonical spelling. Names are checked when they resolve (guardedLookup).
  if (refusedAddress(url.hostname)) {
    throw new KubeconfigError(
      `${where}: server must not be ${REFUSED_WHY} (cloud metadata and its credentials live there)`,
    );
  }
  return server.replace(/\/+$/, '');
}

/**
 * Reduces a kubeconfig to one context (the named one, else the current context) with inline
 * credentials only. Throws KubeconfigError with the reason when it cannot be used safely.
 */
export function sanitizeKubeconfig(text: string, contextName?: string): SanitizedContext {
  const doc = parseKubeconfig(text);
  const contexts = namedEntries(doc, 'contexts', 'context');
  const clusters = namedEntries(doc, 'clusters', 'cluster');
  const users = namedEntries(doc, 'users', 'user');
  if (contexts.size === 0) throw new KubeconfigError('kubeconfig has no contexts');

  let name = contextName;
  if (name === undefined) {
    const current = doc['current-context'];
    if (typeof current === 'string' && current !== '') {
      if (!contexts.has(current))
        throw new KubeconfigError(`current-context "${current}" is not one of the kubeconfig's contexts`);
      name = current;
    } else if (contexts.size === 1) {
      name = [...contexts.keys()][0]!;
    } else {
      throw new KubeconfigError('kubeconfig has several contexts and no current-context');
    }
  }
  const context = contexts.get(name);
  if (!context) throw new KubeconfigError(`context "${name}" is not in the kubeconfig`);
  const where = `context "${name}"`;

  const clusterName = optionalString(where, 'cluster', context.cluster);
  if (!clusterName) throw new KubeconfigError(`${where} names no cluster`);
  const cluster = clusters.get(clusterName);
  if (!cluster) throw new KubeconfigError(`${where}: cluster "${clusterName}" is not in the kubeconfig`);
  const userName = optionalString(where, 'user', context.user);
  const user = userName === undefined ? {} : users.get(userName);
  if (!user) throw new KubeconfigError(`${where}: user "${userName}" is not in the kubeconfig`);

  const clusterWhere = `cluster "${clusterName}"`;
  for (const [field, reason] of Object.entries(FORBIDDEN_CLUSTER_FIELDS)) {
    if (cluster[field] !== undefined && cluster[field] !== '') throw new KubeconfigError(`${clusterWhere}: ${reason}`);
  }
  const userWhere = `user "${userName}"`;
  for (const [field, reason] of Object.entries(FORBIDDEN_USER_FIELDS)) {
    if (user[field] !== undefined && user[field] !== null && user[field] !== '')
      throw new KubeconfigError(`${userWhere}: ${reason}`);
  }

  const insecure = cluster['insecure-skip-tls-verify'];
  if (insecure !== undefined && typeof insecure !== 'boolean') {
    throw new KubeconfigError(`${clusterWhere}: insecure-skip-tls-verify must be true or false`);
  }
  const credentials: ClusterCredentials = {
    server: sanitizeServer(clusterWhere, cluster.server),
    insecureSkipTlsVerify: insecure === true,
  };
  const caData = base64Field(clusterWhere, 'certificate-authority-data', cluster['certificate-authority-data']);
  if (caData) {
    checkCertificates(clusterWhere, 'certificate-authority-data', caData);
    credentials.caData = caData;
  }
  if (caData && credentials.insecureSkipTlsVerify) {
    throw new KubeconfigError(
      `${clusterWhere}: certificate-authority-data and insecure-skip-tls-verify cannot both be set`,
    );
  }
  const tlsServerName = optionalString(clusterWhere, 'tls-server-name', cluster['tls-server-name']);
  if (tlsServerName) credentials.tlsServerName = tlsServerName;

  const cert = base64Field(userWhere, 'client-certificate-data', user['client-certificate-data']);
  const key = base64Field(userWhere, 'client-key-data', user['client-key-data']);
  if (!!cert !== !!key)
    throw new KubeconfigError(`${userWhere}: client-certificate-data and client-key-data go together`);
  if (cert && key) {
    checkCertificates(userWhere, 'client-certificate-data', cert);
    checkPrivateKey(userWhere, 'client-key-data', key);
    credentials.clientCertificateData = cert;
    credentials.clientKeyData = key;
  }
  const token = optionalString(userWhere, 'token', user.token);
  if (token) {
    if (/[\r\n]/.test(token)) throw new KubeconfigError(`${userWhere}: token must be one line`);
    credentials.token = token.trim();
  }
  const username = optionalString(userWhere, 'username', user.username);
  const password = optionalString(userWhere, 'password', user.password);
  if (username !== undefined || password !== undefined) {
    if (!username || password === undefined)
      throw new KubeconfigError(`${userWhere}: username and password go together`);
    credentials.username = username;
    credentials.password = password;
  }

  return { context: name, credentials, kubeconfig: credentialsToKubeconfig(name, credentials) };
}

/** Every context of a kubeconfig, each sanitized on its own; failures carry their reason. */
export function sanitizeAllContexts(text: string): {
  current: string;
  usable: SanitizedContext[];
  skipped: { context: string; reason: string }[];
} {
  const { contexts, current } = listContexts(text);
  // As kubectl does: a current-context that names no context is an error, not "pick another".
  if (current !== '' && !contexts.includes(current))
    throw new KubeconfigError(`current-context "${current}" is not one of the kubeconfig's contexts`);
  const usable: SanitizedContext[] = [];
  const skipped: { context: string; reason: string }[] = [];
  for (const context of contexts) {
    try {
      usable.push(sanitizeKubeconfig(text, context));
    } catch (err) {
      if (!(err instanceof KubeconfigError)) throw err;
      skipped.push({ context, reason: err.message });
    }
  }
  return { current, usable, skipped };
}

/** A single-context kubeconfig YAML from inline credentials. */
export function credentialsToKubeconfig(name: string, c: ClusterCredentials): string {
  const cluster: Obj = { server: c.server };
  if (c.caData) cluster['certificate-authority-data'] = c.caData;
  if (c.insecureSkipTlsVerify) cluster['insecure-skip-tls-verify'] = true;
  if (c.tlsServerName) cluster['tls-server-name'] = c.tlsServerName;
  const user: Obj = {};
  if (c.clientCertificateData) user['client-certificate-data'] = c.clientCertificateData;
  if (c.clientKeyData) user['client-key-data'] = c.clientKeyData;
  if (c.token) user.token = c.token;
  if (c.username) {
    user.username = c.username;
    user.password = c.password;
  }
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster }],
    users: [{ name, user }],
    contexts: [{ name, context: { cluster: name, user: name } }],
    'current-context': name,
  });
}
