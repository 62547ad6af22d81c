// Helpers of the fault tests: their own control planes under .kiteline/test/fault-* (never the
// shared ones), killed with SIGKILL and restarted on the same ports with the same data; a
// request that cannot hang; the API server's in-flight watch count; a process's open sockets.
import { request } from 'node:https';
import { join } from 'node:path';
import {
  readState,
  startControlPlane,
  stopControlPlane,
  type ControlPlaneHandle,
} from '../../src/controlplane/controlplane.js';
import { isAlive } from '../../src/controlplane/processes.js';
import { TEST_DIR } from './clusters.js';
import { eventually } from './eventually.js';
import { call, type HttpResponse, type RequestOptions } from './gateway.js';

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** A control plane of the fault tests' own (dir .kiteline/test/NAME); stopped by t.teardown. */
export async function faultControlPlane(t: Teardown, name: string): Promise<ControlPlaneHandle> {
  const dir = join(TEST_DIR, name);
  t.teardown(() => stopControlPlane(dir));
  return startControlPlane({ dir, name });
}

/** SIGKILLs every process of the control plane (no graceful shutdown); data and ports stay. */
export async function killControlPlane(cp: ControlPlaneHandle): Promise<void> {
  const state = readState(cp.dir);
  if (!state) throw new Error(`no control plane in ${cp.dir}`);
  const pids = [state.pids.apiserver, state.pids.etcd, state.pids.controllerManager].filter((pid) =>
    isAlive(pid, cp.dir),
  );
  for (const pid of pids) process.kill(pid, 'SIGKILL');
  await eventually('the killed processes to be gone', () => pids.every((pid) => !isAlive(pid, cp.dir)), 10_000);
}

/** Starts a killed control plane again (same dir: same ports, same etcd data). */
export function restartControlPlane(cp: ControlPlaneHandle): Promise<ControlPlaneHandle> {
  return startControlPlane({ dir: cp.dir, version: cp.version });
}

/** A gateway call that gives up after timeoutMs: status 0 means it hung. */
export async function callWithin(
  base: string,
  method: string,
  path: string,
  options: RequestOptions,
  timeoutMs = 10_000,
): Promise<HttpResponse> {
  try {
    return await call(base, method, path, { ...options, signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    return { status: 0, headers: new Headers(), body: undefined, text: `no answer: ${(err as Error).message}` };
  }
}

/**
 * The sum of an API server metric (Prometheus text from /metrics) over the series whose labels
 * include all of `labels`, e.g. ('etcd_request_duration_seconds_count', { operation: 'update' }).
 */
export function apiserverMetric(cp: ControlPlaneHandle, name: string, labels: Record<string, string>): Promise<number> {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  return new Promise((resolve, reject) => {
    const req = request(
      `${cp.server}/metrics`,
      { ca: cp.caPem, headers: { authorization: `Bearer ${cp.token}` }, agent: false, timeout: 10_000 },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => {
          if (res.statusCode !== 200) return reject(new Error(`metrics answered ${res.statusCode}`));
          let sum = 0;
          for (const line of text.split('\n')) {
            if (line.startsWith(`${name}{`) && wanted.every((w) => line.includes(w)))
              sum += Number(line.split(' ').pop());
          }
          resolve(sum);
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('metrics timed out')));
    req.on('error', reject);
    req.end();
  });
}

/**
 * The API server's in-flight long-running requests (the gauge apiserver_longrunning_requests; it was
 * apiserver_longrunning_gauge until Kubernetes 1.23) whose labels include all of `labels`, e.g.
 * { verb: 'WATCH', resource: 'configmaps', scope: 'namespace' }.
 */
export function apiserverLongRunning(cp: ControlPlaneHandle, labels: Record<string, string>): Promise<number> {
  return apiserverMetric(cp, LONG_RUNNING_GAUGE, labels);
}

export const LONG_RUNNING_GAUGE = 'apiserver_longrunning_requests';

export { openSockets } from '../../bench/children.js';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
