// A real local Kubernetes control plane: etcd + kube-apiserver + kube-controller-manager, started
// detached on free loopback ports, with all data in one directory so a restart keeps it.
//
// DIR/
//   etcd/           etcd data
//   pki/            service-account keys, the API server's self-signed serving cert (cert-dir)
//   tokens.csv      the admin token (group system:masters)
//   kubeconfig      admin kubeconfig with the real CA inlined
//   state.json      name, ports, and the pids of the running processes (0 once stopped)
//   logs/*.log      each process's output
import { spawn } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join, resolve } from 'node:path';
import { stringify } from 'yaml';
import { ensureBinaries, type Binaries } from './binaries.js';
import { freePort, portIsFree } from './ports.js';
import { isAlive, terminate } from './processes.js';

export interface ControlPlaneState {
  name: string;
  dir: string;
  server: string;
  ports: { etcdClient: number; etcdPeer: number; apiserver: number };
  pids: { etcd: number; apiserver: number; controllerManager: number };
}

export interface ControlPlaneHandle extends ControlPlaneState {
  kubeconfigPath: string;
  token: string;
  caPem: string;
}

export interface StartOptions {
  dir: string;
  name?: string;
  /** Overall time allowed for the processes to become ready. */
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
}

const SERVICE_ACCOUNT_ISSUER = 'https://kubernetes.default.svc.cluster.local';

function paths(dir: string) {
  return {
    etcdData: join(dir, 'etcd'),
    pki: join(dir, 'pki'),
    saKey: join(dir, 'pki', 'sa.key'),
    saPub: join(dir, 'pki', 'sa.pub'),
    servingCert: join(dir, 'pki', 'apiserver.crt'),
    tokens: join(dir, 'tokens.csv'),
    kubeconfig: join(dir, 'kubeconfig'),
    state: join(dir, 'state.json'),
    logs: join(dir, 'logs'),
  };
}

export function readState(dir: string): ControlPlaneState | undefined {
  const file = paths(resolve(dir)).state;
  if (!existsSync(file)) return undefined;
  return JSON.parse(readFileSync(file, 'utf8')) as ControlPlaneState;
}

function ensureCredentials(p: ReturnType<typeof paths>): string {
  mkdirSync(p.pki, { recursive: true, mode: 0o700 });
  if (!existsSync(p.saKey)) {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    writeFileSync(p.saKey, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    writeFileSync(p.saPub, publicKey.export({ type: 'spki', format: 'pem' }));
  }
  if (!existsSync(p.tokens)) {
    writeFileSync(p.tokens, `${randomBytes(32).toString('hex')},admin,admin,system:masters\n`, { mode: 0o600 });
  }
  return readFileSync(p.tokens, 'utf8').split(',')[0]!;
}

async function choosePort(previous: number | undefined): Promise<number> {
  if (previous && (await portIsFree(previous))) return previous;
  return freePort();
}

function launch(bin: string, args: string[], logFile: string, env: NodeJS.ProcessEnv): number {
  const out = openSync(logFile, 'a');
  const child = spawn(bin, args, { detached: true, stdio: ['ignore', out, out], env });
  closeSync(out);
  child.unref();
  if (!child.pid) throw new Error(`could not start ${bin}`);
  return child.pid;
}

function get(url: string, opts: { ca?: string; token?: string }): Promise<{ status: number; body: string }> {
  return new Promise((resolvePromise, reject) => {
    const u = new URL(url);
    const requester = u.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = requester(
      u,
      {
        method: 'GET',
        ca: opts.ca,
        headers: opts.token ? { authorization: `Bearer ${opts.token}` } : {},
        timeout: 3000,
        agent: false,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolvePromise({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

async function waitFor(what: string, deadline: number, pid: number, logFile: string, check: () => Promise<boolean>): Promise<void> {
  let lastError = '';
  while (Date.now() < deadline) {
    if (!isAlive(pid)) {
      throw new Error(`${what} exited during start-up; see ${logFile}:\n${tail(logFile)}`);
    }
    try {
      if (await check()) return;
    } catch (err) {
      lastError = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${what} not ready in time (${lastError || 'no answer'}); see ${logFile}:\n${tail(logFile)}`);
}

function tail(file: string, lines = 15): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

export function kubeconfigYaml(name: string, server: string, caPem: string, token: string): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster: { server, 'certificate-authority-data': Buffer.from(caPem).toString('base64') } }],
    users: [{ name: `${name}-admin`, user: { token } }],
    contexts: [{ name, context: { cluster: name, user: `${name}-admin` } }],
    'current-context': name,
  });
}

function handle(dir: string, state: ControlPlaneState): ControlPlaneHandle {
  const p = paths(dir);
  return {
    ...state,
    kubeconfigPath: p.kubeconfig,
    token: readFileSync(p.tokens, 'utf8').split(',')[0]!,
    caPem: readFileSync(p.servingCert, 'utf8'),
  };
}

/** Is every process of the control plane in DIR alive? */
export function isRunning(dir: string): boolean {
  const state = readState(dir);
  return !!state && Object.values(state.pids).every((pid) => isAlive(pid, resolve(dir)));
}

/**
 * Starts the control plane in DIR (or returns the running one) and resolves once the API server
 * answers /readyz and the controller manager has created the default service account.
 */
export async function startControlPlane(options: StartOptions): Promise<ControlPlaneHandle> {
  const dir = resolve(options.dir);
  mkdirSync(dir, { recursive: true });
  const release = await acquireStartLock(dir, options.timeoutMs ?? 120_000);
  try {
    return await startLocked(dir, options);
  } finally {
    release();
  }
}

/**
 * Serializes starts of one directory across processes (parallel test files may all ask for the
 * shared host): an exclusive lock file holding the starter's pid; a stale one is taken over.
 */
async function acquireStartLock(dir: string, timeoutMs: number): Promise<() => void> {
  const lock = join(dir, 'start.lock');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const fd = openSync(lock, 'wx');
      writeFileSync(fd, String(process.pid));
      closeSync(fd);
      return () => rmSync(lock, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      let holder = 0;
      let ageMs = 0;
      try {
        holder = Number(readFileSync(lock, 'utf8') || '0');
        ageMs = Date.now() - statSync(lock).mtimeMs;
      } catch {
        continue; // released meanwhile
      }
      // An empty lock is one being written; a dead holder's lock is stale.
      if ((holder && !isAlive(holder)) || (!holder && ageMs > 5000)) {
        rmSync(lock, { force: true });
        continue;
      }
      if (Date.now() > deadline) throw new Error(`another process (pid ${holder}) is starting the control plane in ${dir}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

async function startLocked(dir: string, options: StartOptions): Promise<ControlPlaneHandle> {
  const env = options.env ?? process.env;
  const p = paths(dir);
  const previous = readState(dir);
  if (previous && isRunning(dir)) return handle(dir, previous);
  if (previous) await stopControlPlane(dir); // half-dead: clean up the survivors first

  const bins: Binaries = ensureBinaries(env);
  const name = options.name ?? previous?.name ?? 'kiteline';
  const deadline = Date.now() + (options.timeoutMs ?? 120_000);
  mkdirSync(p.logs, { recursive: true });
  mkdirSync(p.etcdData, { recursive: true, mode: 0o700 });
  const token = ensureCredentials(p);

  const ports = {
    etcdClient: await choosePort(previous?.ports.etcdClient),
    etcdPeer: await choosePort(previous?.ports.etcdPeer),
    apiserver: await choosePort(previous?.ports.apiserver),
  };
  const etcdUrl = `http://127.0.0.1:${ports.etcdClient}`;
  const server = `https://127.0.0.1:${ports.apiserver}`;
  const pids = { etcd: 0, apiserver: 0, controllerManager: 0 };
  const saveState = () => writeFileSync(p.state, JSON.stringify({ name, dir, server, ports, pids }, null, 2));

  try {
    const etcdLog = join(p.logs, 'etcd.log');
    pids.etcd = launch(bins.etcd, [
      '--name', name,
      '--data-dir', p.etcdData,
      '--listen-client-urls', etcdUrl,
      '--advertise-client-urls', etcdUrl,
      '--listen-peer-urls', `http://127.0.0.1:${ports.etcdPeer}`,
      '--initial-advertise-peer-urls', `http://127.0.0.1:${ports.etcdPeer}`,
      '--initial-cluster', `${name}=http://127.0.0.1:${ports.etcdPeer}`,
      '--log-level', 'warn',
    ], etcdLog, env);
    saveState();
    await waitFor('etcd', deadline, pids.etcd, etcdLog, async () => (await get(`${etcdUrl}/health`, {})).status === 200);

    const apiLog = join(p.logs, 'kube-apiserver.log');
    pids.apiserver = launch(bins.kubeApiserver, [
      `--etcd-servers=${etcdUrl}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      `--secure-port=${ports.apiserver}`,
      '--insecure-port=0',
      `--cert-dir=${p.pki}`,
      `--token-auth-file=${p.tokens}`,
      '--authorization-mode=RBAC',
      `--service-account-issuer=${SERVICE_ACCOUNT_ISSUER}`,
      `--service-account-key-file=${p.saPub}`,
      `--service-account-signing-key-file=${p.saKey}`,
      '--service-cluster-ip-range=10.0.0.0/24',
      '--allow-privileged=true',
      '--v=1',
    ], apiLog, env);
    saveState();
    await waitFor('kube-apiserver', deadline, pids.apiserver, apiLog, async () => {
      if (!existsSync(p.servingCert)) return false;
      const res = await get(`${server}/readyz`, { ca: readFileSync(p.servingCert, 'utf8'), token });
      return res.status === 200;
    });
    const caPem = readFileSync(p.servingCert, 'utf8');
    writeFileSync(p.kubeconfig, kubeconfigYaml(name, server, caPem, token), { mode: 0o600 });

    const kcmLog = join(p.logs, 'kube-controller-manager.log');
    pids.controllerManager = launch(bins.kubeControllerManager, [
      `--kubeconfig=${p.kubeconfig}`,
      `--service-account-private-key-file=${p.saKey}`,
      `--root-ca-file=${p.servingCert}`,
      '--leader-elect=false',
      '--port=0',
      '--secure-port=0',
      '--controllers=*',
      '--v=1',
    ], kcmLog, env);
    saveState();
    // The default service account is created by the controller manager: proof that it runs.
    await waitFor('kube-controller-manager', deadline, pids.controllerManager, kcmLog, async () => {
      const res = await get(`${server}/api/v1/namespaces/default/serviceaccounts/default`, { ca: caPem, token });
      return res.status === 200;
    });
    return handle(dir, { name, dir, server, ports, pids });
  } catch (err) {
    await stopControlPlane(dir);
    throw err;
  }
}

/** Stops every process of the control plane in DIR; data stays. Safe to call when nothing runs. */
export async function stopControlPlane(dir: string): Promise<void> {
  const abs = resolve(dir);
  const state = readState(abs);
  if (!state) return;
  // Controllers first, storage last, so nothing writes to a dead etcd.
  for (const pid of [state.pids.controllerManager, state.pids.apiserver, state.pids.etcd]) {
    if (pid) await terminate(pid, abs);
  }
  // Keep name and ports (a restart reuses them, so kubeconfigs handed out stay valid); no pids.
  writeFileSync(paths(abs).state, JSON.stringify({ ...state, pids: { etcd: 0, apiserver: 0, controllerManager: 0 } }, null, 2));
}
