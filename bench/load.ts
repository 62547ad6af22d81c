// Load generation: autocannon for request/response rows, and a hand-rolled watch reader for the
// watch row (a watch is one long response, not many requests).
import http from 'node:http';
import https from 'node:https';
import autocannon from 'autocannon';
import { processStats } from './children.js';

/** One way to reach the target cluster's API: direct, through kubectl proxy, or through the gateway. */
export interface Path {
  label: string;
  /** Base URL, e.g. https://127.0.0.1:6443 or http://127.0.0.1:8001. */
  base: string;
  /** Headers sent on every request (credentials, cluster selection). */
  headers: Record<string, string>;
  /** CA of an https base. */
  ca?: string;
  /** The process that serves this path besides the API server (kubectl proxy, a gateway): its CPU is measured. */
  pid?: number;
}

export interface LoadRequest {
  method: 'GET' | 'PATCH';
  /** The request path, or a function giving each request its own (a random object of many). */
  path: string | (() => string);
  headers?: Record<string, string>;
  /** A fresh body per request (PATCH), so every write changes the object. */
  body?: () => string;
}

export interface LoadResult {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  bytesPerSecond: number;
  /** Answers that were not 2xx plus connection errors and timeouts: a healthy run has none. */
  failures: number;
  /** Requests answered in the measured seconds. */
  requests: number;
  /** CPU (user + system) of the path's own process per answered request, in µs; undefined when it has none. */
  cpuMicrosPerRequest?: number;
  /** The system (kernel) part of it. */
  systemCpuMicrosPerRequest?: number;
}

function cannon(path: Path, request: LoadRequest, connections: number, seconds: number): Promise<autocannon.Result> {
  const { body, path: requestPath } = request;
  const perRequest = body || typeof requestPath === 'function';
  const setupRequest = (req: any) => ({
    ...req,
    ...(body ? { body: body() } : {}),
    ...(typeof requestPath === 'function' ? { path: requestPath() } : {}),
  });
  return autocannon({
    url: path.base,
    connections,
    duration: seconds,
    timeout: 30,
    // autocannon never verifies certificates (it connects with rejectUnauthorized: false); the
    // CA is passed anyway so the TLS handshake is the same as a verifying client's.
    ...(path.ca ? { tlsOptions: { ca: path.ca } } : {}),
    requests: [
      {
        method: request.method,
        path: typeof requestPath === 'function' ? requestPath() : requestPath,
        headers: { ...path.headers, ...request.headers },
        ...(perRequest ? { setupRequest } : {}),
      },
    ],
  });
}

/** Sends the request for `seconds` at `connections` concurrent connections, and measures. */
export async function measureLoad(
  path: Path,
  request: LoadRequest,
  connections: number,
  seconds: number,
): Promise<LoadResult> {
  const before = path.pid ? processStats(path.pid) : undefined;
  const result = await cannon(path, request, connections, seconds);
  const after = path.pid ? processStats(path.pid) : undefined;
  const requests = result.requests.total;
  const perRequest = (seconds: number) => (seconds * 1e6) / requests;
  return {
    requestsPerSecond: result.requests.average,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    bytesPerSecond: result.throughput.average,
    failures: result.non2xx + result.errors + result.timeouts,
    requests,
    ...(before && after && requests > 0
      ? {
          cpuMicrosPerRequest: perRequest(after.cpuSeconds - before.cpuSeconds),
          systemCpuMicrosPerRequest: perRequest(after.systemCpuSeconds - before.systemCpuSeconds),
        }
      : {}),
  };
}

/** Sends the request for `seconds` without measuring (connections, caches and JIT warm up). */
export async function warmUp(path: Path, request: LoadRequest, connections: number, seconds: number): Promise<void> {
  await cannon(path, request, connections, seconds);
}

/** Warms up, then runs the request for `seconds` at `connections` concurrent connections. */
export async function runLoad(
  path: Path,
  request: LoadRequest,
  connections: number,
  seconds: number,
  warmupSeconds: number,
): Promise<LoadResult> {
  await warmUp(path, request, connections, warmupSeconds);
  return measureLoad(path, request, connections, seconds);
}

/**
 * One result from equally long rounds of the same request: mean per second and bytes, mean p50,
 * the worst p99, all failures.
 */
export function combineRounds(rounds: LoadResult[]): LoadResult {
  const mean = (pick: (r: LoadResult) => number) => rounds.reduce((sum, r) => sum + pick(r), 0) / rounds.length;
  const sum = (pick: (r: LoadResult) => number) => rounds.reduce((total, r) => total + pick(r), 0);
  const requests = sum((r) => r.requests);
  const measured = rounds.every((r) => r.cpuMicrosPerRequest !== undefined);
  return {
    requestsPerSecond: mean((r) => r.requestsPerSecond),
    p50Ms: mean((r) => r.p50Ms),
    p99Ms: Math.max(...rounds.map((r) => r.p99Ms)),
    bytesPerSecond: mean((r) => r.bytesPerSecond),
    failures: sum((r) => r.failures),
    requests,
    // Weighted by requests: the CPU of all rounds over all their requests.
    ...(measured && requests > 0
      ? {
          cpuMicrosPerRequest: sum((r) => r.cpuMicrosPerRequest! * r.requests) / requests,
          systemCpuMicrosPerRequest: sum((r) => r.systemCpuMicrosPerRequest! * r.requests) / requests,
        }
      : {}),
  };
}

/**
 * Opens one watch and resolves with the ms until `events` events (one JSON line each) arrived.
 * The caller picks a watch that has that many events ready (e.g. resourceVersion=0 on a
 * namespace holding that many objects: the API server answers with one ADDED event per object).
 */
export function timeWatch(path: Path, requestPath: string, events: number, timeoutMs = 60_000): Promise<number> {
  const url = new URL(path.base + requestPath);
  const started = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const transport = url.protocol === 'https:' ? https : http;
    const req = transport.request(
      url,
      {
        method: 'GET',
        agent: false,
        headers: { ...path.headers, accept: 'application/json' },
        ...(path.ca ? { ca: path.ca } : {}),
      },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          return reject(new Error(`${path.label} watch answered ${res.statusCode}`));
        }
        let seen = 0;
        res.on('data', (chunk: Buffer) => {
          for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, i + 1)) seen++;
          if (seen >= events) {
            clearTimeout(timer);
            resolve(Number(process.hrtime.bigint() - started) / 1e6);
            req.destroy();
          }
        });
        res.on('error', () => undefined);
      },
    );
    const timer = setTimeout(
      () => req.destroy(new Error(`${path.label} watch: fewer than ${events} events in ${timeoutMs} ms`)),
      timeoutMs,
    );
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.end();
  });
}

/** Runs `rounds` watches one after the other; events per second of the median round and p50/p99 of round times. */
export async function runWatch(path: Path, requestPath: string, events: number, rounds: number): Promise<LoadResult> {
  await timeWatch(path, requestPath, events); // warm-up
  const times: number[] = [];
  for (let i = 0; i < rounds; i++) times.push(await timeWatch(path, requestPath, events));
  times.sort((a, b) => a - b);
  const p50 = percentile(times, 0.5);
  return {
    requestsPerSecond: (events * 1000) / p50,
    p50Ms: p50,
    p99Ms: percentile(times, 0.99),
    bytesPerSecond: 0,
    failures: 0,
    requests: rounds,
  };
}

export function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
}
