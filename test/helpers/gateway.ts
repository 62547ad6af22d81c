// Starts kiteline gateways in the test process against a test host cluster, each test file in its
// own install namespace, and a small HTTP client for calling them.
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { loadConfig, PACKAGE_ROOT, type Config } from '../../src/config.js';
import { freePort } from '../../src/controlplane/ports.js';
import { createLogger } from '../../src/log.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { TEST_DIR, testControlPlane, uniqueName, type TestClusterName } from './clusters.js';
import { eventually } from './eventually.js';

export interface TestGateway extends RunningServer {
  namespace: string;
  kubeconfig: string;
  config: Config;
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface GatewayOptions {
  namespace?: string;
  host?: TestClusterName;
  /** A host kubeconfig file of a control plane the test started itself (instead of `host`). */
  kubeconfig?: string;
  /** Extra environment, e.g. KITELINE_LOGIN_MAX_FAILURES. */
  env?: Record<string, string>;
  /** Log file name under .kiteline/test/logs (the security tests scan these for secrets). */
  logName?: string;
  /** Settings no flag or variable sets (e.g. clusterLookup), over the loaded configuration. */
  config?: Partial<Config>;
}

/** Starts a gateway on a free port; stopped by t.teardown. */
export async function startGateway(t: Teardown, options: GatewayOptions = {}): Promise<TestGateway> {
  const kubeconfig = options.kubeconfig ?? (await testControlPlane(options.host ?? 'host')).kubeconfigPath;
  const namespace = options.namespace ?? uniqueName('kl');
  const config = loadConfig([], {
    KUBECONFIG: kubeconfig,
    KITELINE_NAMESPACE: namespace,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    ...options.env,
  });
  Object.assign(config, options.config);
  const logDir = join(TEST_DIR, 'logs');
  mkdirSync(logDir, { recursive: true });
  const destination = pino.destination({
    dest: join(logDir, `${options.logName ?? namespace}.log`),
    sync: true,
    append: true,
  });
  const server = await startServer(config, createLogger(config.logLevel, {}, destination));
  t.teardown(() => server.close());
  // Every route's schema compiles (they are compiled after listen: src/gateway/lazy-schemas.ts).
  await server.schemasCompiled;
  return { ...server, namespace, kubeconfig, config };
}

/** A gateway as its own process (`node bin/kiteline.js serve`), for tests that kill one. */
export interface GatewayProcess {
  url: string;
  pid: number;
  /** Resolves when the process has exited. */
  exited: Promise<unknown>;
}

/**
 * Starts `kiteline serve` on a free port against the host plane (its log in
 * .kiteline/test/logs/<logName>.log), waits until it answers, and SIGKILLs it at teardown if it
 * still runs.
 */
export async function spawnGatewayProcess(
  t: Teardown,
  options: {
    kubeconfig: string;
    namespace: string;
    logName: string;
    env?: Record<string, string>;
    /** The port to listen on (the port of a process it replaces: a container restarted in its pod). */
    port?: number;
  },
): Promise<GatewayProcess> {
  const port = options.port ?? (await freePort());
  mkdirSync(join(TEST_DIR, 'logs'), { recursive: true });
  const out = openSync(join(TEST_DIR, 'logs', `${options.logName}.log`), 'a');
  const child = spawn(
    process.execPath,
    [join(PACKAGE_ROOT, 'bin', 'kiteline.js'), 'serve', '--port', String(port), '--host', '127.0.0.1'],
    {
      env: { ...process.env, KUBECONFIG: options.kubeconfig, KITELINE_NAMESPACE: options.namespace, ...options.env },
      stdio: ['ignore', out, out],
    },
  );
  closeSync(out);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    return exited;
  });
  const url = `http://127.0.0.1:${port}`;
  const healthy = () =>
    call(url, 'GET', '/healthz', { signal: AbortSignal.timeout(2000) }).then(
      (res) => res.status === 200,
      () => false,
    );
  await eventually('the gateway process to listen', healthy, 60_000, 200);
  return { url, pid: child.pid!, exited };
}

export interface HttpResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface RequestOptions {
  body?: unknown;
  /** A raw body string (sent as is). */
  raw?: string;
  headers?: Record<string, string>;
  /** Aborts the request (e.g. AbortSignal.timeout) instead of waiting forever. */
  signal?: AbortSignal;
}

/** Calls the gateway; parses JSON answers. Never throws for HTTP errors. */
export async function call<T = any>(
  base: string,
  method: string,
  path: string,
  options: RequestOptions = {},
): Promise<HttpResponse<T>> {
  const headers: Record<string, string> = { ...options.headers };
  let body: string | undefined = options.raw;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(base + path, {
    method,
    headers,
    body,
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const text = await res.text();
  let parsed: unknown = undefined;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, body: parsed as T, text };
}

/**
 * The audit log line of one request (by the request id the client sent) in a gateway's log file
 * (startGateway's logName), or undefined while it is not written.
 */
export function auditRecordOf(logName: string, requestId: string): Record<string, unknown> | undefined {
  return readFileSync(join(TEST_DIR, 'logs', `${logName}.log`), 'utf8')
    .split('\n')
    .filter((line) => line.includes(requestId) && line.includes('"audit"'))
    .map((line) => JSON.parse(line) as { msg: string; audit: Record<string, unknown> })
    .find((line) => line.msg === 'audit' && line.audit.requestId === requestId)?.audit;
}
