// Settings of `make bench`, read from the environment once. BENCH_QUICK=1 shrinks every phase for
// iteration; every number can also be set on its own (see docs/benchmarks.md).
import { resolve } from 'node:path';
import { PACKAGE_ROOT } from '../src/config.js';

export interface BenchSettings {
  /** Where the benchmark's own control planes live (host/ and target/). */
  dir: string;
  /** Seconds each load row runs (after a short warm-up). */
  durationSeconds: number;
  warmupSeconds: number;
  /** Rounds each request/response row is split into, the paths taking turns. */
  rounds: number;
  /** Concurrent connections for GET and PATCH rows. */
  connections: number;
  /** Concurrent connections for the LIST row (each answer is megabytes). */
  listConnections: number;
  /** ConfigMaps in the LIST namespace. */
  listSize: number;
  /** ConfigMaps of the spread rows (each GET a random one of them; LIST all), and their connections. */
  spreadSize: number;
  spreadConnections: number;
  /** Events per watch, and how many watches each path opens one after the other. */
  watchEvents: number;
  watchRounds: number;
  /** Audit records written for the audit-log figures. */
  auditRecords: number;
  /** Registered clusters for the start-up figure. */
  clusters: number;
  /** Users for the user-list figure. */
  users: number;
  /** Log level of the gateway child process (info = what production logs). */
  gatewayLogLevel: string;
  /** Extra node flags for the gateway child (e.g. --cpu-prof while optimizing). */
  gatewayNodeArgs: string[];
  /**
   * Which comparison rows run (get, spread-get, spread-get-any, spread-list, list, patch, watch),
   * and whether the simulated dashboard (dashboard) and the audit figures (audit) do (the scale
   * figures: BENCH_SCALE).
   */
  rows: string[];
  scale: boolean;
}

function whole(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < 1) throw new Error(`${name} must be a positive whole number, got "${raw}"`);
  return Number(raw);
}

export function loadSettings(): BenchSettings {
  const quick = process.env.BENCH_QUICK === '1';
  return {
    dir: resolve(process.env.BENCH_DIR || resolve(PACKAGE_ROOT, '.kiteline', 'bench')),
    durationSeconds: whole('BENCH_DURATION', quick ? 3 : 10),
    warmupSeconds: whole('BENCH_WARMUP', quick ? 1 : 2),
    rounds: whole('BENCH_ROUNDS', quick ? 1 : 5),
    connections: whole('BENCH_CONNECTIONS', quick ? 16 : 32),
    listConnections: whole('BENCH_LIST_CONNECTIONS', 4),
    listSize: whole('BENCH_LIST_SIZE', quick ? 500 : 5000),
    spreadSize: whole('BENCH_SPREAD_SIZE', 500),
    spreadConnections: whole('BENCH_SPREAD_CONNECTIONS', 16),
    watchEvents: whole('BENCH_WATCH_EVENTS', 1000),
    watchRounds: whole('BENCH_WATCH_ROUNDS', quick ? 3 : 10),
    auditRecords: whole('BENCH_AUDIT_RECORDS', quick ? 10_000 : 100_000),
    clusters: whole('BENCH_CLUSTERS', quick ? 20 : 200),
    users: whole('BENCH_USERS', quick ? 1000 : 10000),
    gatewayLogLevel: process.env.BENCH_GATEWAY_LOG_LEVEL || 'info',
    gatewayNodeArgs: (process.env.BENCH_GATEWAY_NODE_ARGS ?? '').split(/\s+/).filter(Boolean),
    rows: (process.env.BENCH_ROWS || 'get,spread-get,spread-get-any,spread-list,list,patch,watch,dashboard,audit')
      .split(',')
      .map((r) => r.trim()),
    scale: process.env.BENCH_SCALE !== '0',
  };
}
