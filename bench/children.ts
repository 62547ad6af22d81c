// The processes the benchmark measures: the gateway (`node bin/kiteline.js serve`, a child so its
// CPU time and peak RSS can be read from /proc) and `kubectl proxy` for the target cluster, and
// what /proc tells of a process (CPU, RSS, open sockets; the soak and the fault tests use it too).
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../src/config.js';
import { ensureBinaries } from '../src/controlplane/binaries.js';
import { freePort } from '../src/controlplane/ports.js';

/** Clock ticks per second of /proc/<pid>/stat times (USER_HZ, 100 on Linux). */
const CLOCK_TICKS = 100;

export interface Child {
  process: ChildProcess;
  url: string;
  stop(): Promise<void>;
}

export interface ProcessStats {
  /** User plus system CPU seconds so far, and the system (kernel) part. */
  cpuSeconds: number;
  systemCpuSeconds: number;
  /** Current and peak resident set size in MiB. */
  rssMiB: number;
  peakRssMiB: number;
}

export function processStats(pid: number): ProcessStats {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the parenthesized command name; utime and stime are fields 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const cpuSeconds = (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  const systemCpuSeconds = Number(fields[12]) / CLOCK_TICKS;
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0);
  return { cpuSeconds, systemCpuSeconds, rssMiB: kib('VmRSS') / 1024, peakRssMiB: kib('VmHWM') / 1024 };
}

/** Open sockets of a process (its /proc/PID/fd entries that are sockets). */
export function openSockets(pid: number = process.pid): number {
  const dir = `/proc/${pid}/fd`;
  let count = 0;
  for (const fd of readdirSync(dir)) {
    try {
      if (readlinkSync(join(dir, fd)).startsWith('socket:')) count++;
    } catch {
      /* closed meanwhile */
    }
  }
  return count;
}

function launch(command: string, args: string[], env: NodeJS.ProcessEnv, logFile: string): ChildProcess {
  const out = openSync(logFile, 'a');
  const child = spawn(command, args, { env, stdio: ['ignore', out, out] });
  closeSync(out);
  return child;
}

function stopper(child: ChildProcess): () => Promise<void> {
  return () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
      setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
    });
}

/** Polls url until it answers 200 (or the process dies). Resolves with the ms it took. */
export async function waitHttpOk(
  child: ChildProcess,
  url: string,
  timeoutMs: number,
  headers: Record<string, string> = {},
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${url}: the process exited with ${child.exitCode}`);
    try {
      const res = await fetch(url, { headers });
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`${url} not ready within ${timeoutMs} ms`);
}

/** Starts `kiteline serve` against the host kubeconfig in `namespace`; resolves once it listens. */
export async function startGateway(options: {
  kubeconfig: string;
  namespace: string;
  logDir: string;
  logLevel: string;
  nodeArgs: string[];
  env?: Record<string, string>;
  logName?: string;
}): Promise<Child> {
  const port = await freePort();
  const env = {
    ...process.env,
    ...options.env,
    KUBECONFIG: options.kubeconfig,
    KITELINE_NAMESPACE: options.namespace,
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: options.logLevel,
  };
  const child = launch(
    process.execPath,
    [...options.nodeArgs, join(PACKAGE_ROOT, 'bin', 'kiteline.js'), 'serve'],
    env,
    join(options.logDir, `gateway-${options.namespace}${options.logName ? `-${options.logName}` : ''}.log`),
  );
  return { process: child, url: `http://127.0.0.1:${port}`, stop: stopper(child) };
}

/** Starts `kubectl proxy` for a kubeconfig on a free port and waits until it serves /version. */
export async function startKubectlProxy(kubeconfig: string, logDir: string): Promise<Child> {
  const port = await freePort();
  const child = launch(
    ensureBinaries().kubectl,
    ['--kubeconfig', kubeconfig, 'proxy', '--address=127.0.0.1', `--port=${port}`],
    process.env,
    join(logDir, 'kubectl-proxy.log'),
  );
  const url = `http://127.0.0.1:${port}`;
  await waitHttpOk(child, `${url}/version`, 30_000);
  return { process: child, url, stop: stopper(child) };
}
