// Detached processes of the control plane and its node: launch, wait for readiness, liveness
// checks and termination, guarded against pid reuse.
import { spawn } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync } from 'node:fs';

/** Starts a detached process writing to logFile; returns its pid. */
export function launch(command: string[], logFile: string, env: NodeJS.ProcessEnv): number {
  const [bin, ...args] = command as [string, ...string[]];
  const out = openSync(logFile, 'a');
  const child = spawn(bin, args, { detached: true, stdio: ['ignore', out, out], env });
  closeSync(out);
  child.unref();
  if (!child.pid) throw new Error(`could not start ${bin}`);
  return child.pid;
}

export function tail(file: string, lines = 15): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

/** Polls check until it holds; fails early when the process dies, with its log's tail. */
export async function waitFor(
  what: string,
  deadline: number,
  pid: number,
  logFile: string,
  check: () => Promise<boolean>,
): Promise<void> {
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

/** Pids of live processes whose command line mentions marker (e.g. a directory). */
export function processesMentioning(marker: string): number[] {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .map(Number)
    .filter((pid) => pid !== process.pid && isAlive(pid, marker));
}

/** True when pid runs and (if given) its command line mentions marker, e.g. the data directory. */
export function isAlive(pid: number, marker?: string): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false; // kill(0) would signal our own group
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    if (/\) Z /.test(stat)) return false; // a zombie is dead, only not yet reaped
    if (marker) return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker);
  } catch {
    return false;
  }
  return true;
}

/** SIGTERM, then SIGKILL after graceMs; resolves once the process is gone. */
export async function terminate(pid: number, marker?: string, graceMs = 10_000): Promise<void> {
  if (!isAlive(pid, marker)) return;
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    return;
  }
  const deadline = Date.now() + graceMs;
  while (isAlive(pid, marker)) {
    if (Date.now() > deadline) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        return;
      }
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The client rate of the controller manager and the scheduler. A plane shared by a test suite (or
 * a busy dashboard) deletes thousands of objects with foreground propagation, kiteline's default:
 * the garbage collector then removes a finalizer from each, and every controller of the manager
 * shares one client-side rate limiter. At the default 20 QPS (burst 30) those calls queue for
 * minutes and unrelated foreground deletions time out behind them; an API server on loopback with
 * its own etcd takes ten times that easily.
 */
export const CONTROLLER_CLIENT_RATE = ['--kube-api-qps=200', '--kube-api-burst=400'];
