// Configuration of `kiteline serve`: read from flags and the environment and validated here, once.
// Flags win over environment variables; everything has a default a local run can live with.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
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
  /** Marks the session cookie Secure (also set per request behind https). */
  secureCookies: boolean;
  /** Failed logins allowed per user and per address within loginWindowSeconds before 429. */
  loginMaxFailures: number;
  loginWindowSeconds: number;
  /** Cluster health probes: interval while healthy, connect timeout for upstream calls. */
  clusterProbeIntervalMs: number;
  upstreamConnectTimeoutMs: number;
  /** Identity of this replica (leader election holder id, logs). */
  replicaId: string;
  /** Serve GET /metrics without authentication (default: admin principals only). */
  metricsPublic: boolean;
  /** Also record each admin write as a core/v1 Event in the install namespace. */
  auditEvents: boolean;
  /** Identical object GETs waiting at the same time share one upstream read (read-coalescer.ts). */
  coalesceReads: boolean;
  /** PUTs and PATCHes of one object go upstream one at a time (write-turns.ts). */
  writeTurns: boolean;
}

type Source = Record<string, string | undefined>;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** Parses `--name value`, `--name=value` and boolean `--flag` / `--no-flag` into a map. */
export function parseFlags(argv: string[]): Source {
  const flags: Source = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--')) throw new ConfigError(`unexpected argument: ${arg}`);
    const eq = arg.indexOf('=');
    if (eq > 0) {
      flags[arg.slice(2, eq)] = arg.slice(eq + 1);
    } else if (arg.startsWith('--no-')) {
      flags[arg.slice(5)] = 'false';
    } else if (i + 1 < argv.length && !argv[i + 1]!.startsWith('--')) {
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

function inPodNamespace(serviceAccountDir: string): string | undefined {
  const file = join(serviceAccountDir, 'namespace');
  return existsSync(file) ? readFileSync(file, 'utf8').trim() : undefined;
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
    throw new ConfigError('no host cluster: set KUBECONFIG or --kubeconfig, or run in a pod (make run starts an embedded one)');
  }
  if (kubeconfig && !existsSync(kubeconfig.split(':')[0]!)) {
    throw new ConfigError(`kubeconfig file not found: ${kubeconfig}`);
  }

  const namespace = pick('namespace', 'KITELINE_NAMESPACE') || podNamespace || 'kiteline-system';
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(namespace)) {
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
    bodyLimitBytes: integer('body-limit', pick('body-limit', 'KITELINE_BODY_LIMIT'), 3 * 1024 * 1024, 1024, 64 * 1024 * 1024),
    sessionTtlSeconds: integer('session-ttl', pick('session-ttl', 'KITELINE_SESSION_TTL'), 24 * 3600, 60, 30 * 24 * 3600),
    secureCookies: boolean('secure-cookies', pick('secure-cookies', 'KITELINE_SECURE_COOKIES'), false),
    loginMaxFailures: integer('login-max-failures', pick('login-max-failures', 'KITELINE_LOGIN_MAX_FAILURES'), 10, 1, 10000),
    loginWindowSeconds: integer('login-window', pick('login-window', 'KITELINE_LOGIN_WINDOW'), 300, 1, 86400),
    clusterProbeIntervalMs: integer('probe-interval-ms', pick('probe-interval-ms', 'KITELINE_PROBE_INTERVAL_MS'), 5000, 100, 600000),
    upstreamConnectTimeoutMs: integer('connect-timeout-ms', pick('connect-timeout-ms', 'KITELINE_CONNECT_TIMEOUT_MS'), 5000, 100, 120000),
    replicaId: env.POD_NAME || env.HOSTNAME || `kiteline-${process.pid}`,
    metricsPublic: boolean('metrics-public', pick('metrics-public', 'KITELINE_METRICS_PUBLIC'), false),
    auditEvents: boolean('audit-events', pick('audit-events', 'KITELINE_AUDIT_EVENTS'), false),
    coalesceReads: boolean('coalesce-reads', pick('coalesce-reads', 'KITELINE_COALESCE_READS'), true),
    writeTurns: boolean('write-turns', pick('write-turns', 'KITELINE_WRITE_TURNS'), true),
  };
}
