// The gateway's Prometheus metrics (docs/operations.md): one Metrics object per gateway with its
// own prom-client Registry (never the global one: several gateways share a test process).
// Request and upstream metrics are pushed as they happen; cluster readiness and cache sizes are
// read from their sources at scrape time. Labels only ever hold bounded values: route patterns,
// methods, status codes, registered cluster names, cache names, fixed reasons.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { UpstreamObserver } from '../clusters/types.js';

/** A registered cluster as the readiness gauges show it. */
export interface ClusterSample {
  name: string;
  ready: boolean;
  enabled: boolean;
  version: string;
}

/** What the scrape-time gauges read. */
export interface MetricsSources {
  clusters(): ClusterSample[];
  /** Object counts by cache name, e.g. { users: 3, secrets: 7 }. */
  cacheSizes(): Record<string, number>;
  /** The fleet as this replica sees it: live replicas, and the clusters this one holds. */
  fleet(): { replicas: number; held: number };
}

/** Why a login failed: wrong username or password, too many failures, or a disabled user. */
export type LoginFailureReason = 'bad_credentials' | 'throttled' | 'disabled' | 'bad_request';

const REQUEST_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const UPSTREAM_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export class Metrics {
  readonly registry = new Registry();
  private readonly requests: Counter<'route' | 'method' | 'status' | 'cluster'>;
  private readonly requestDuration: Histogram<'route' | 'method'>;
  private readonly upstreamDuration: Histogram<'cluster' | 'method' | 'code'>;
  private readonly sharedReads: Counter<'cluster'>;
  private readonly loginFailures: Counter<'reason'>;
  private readonly revokedStreams: Counter<'reason'>;
  private readonly mcpToolCalls: Counter<'tool' | 'result'>;
  private readonly recordingFailures: Counter;
  private readonly recordingDropped: Counter;
  private readonly cachedReads: Counter<'cluster' | 'outcome'>;
  private readonly cacheEvictions: Counter<'cluster'>;
  /** What the read caches hold per cluster, set by the gateway once they exist (scrape time). */
  readCacheHeld: () => Array<{ cluster: string; objects: number; bytes: number }> = () => [];

  constructor(sources: MetricsSources) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.requests = new Counter({
      name: 'kiteline_http_requests_total',
      help: 'HTTP requests answered, by route pattern (unmatched for unknown paths), method, status and target cluster',
      labelNames: ['route', 'method', 'status', 'cluster'],
      registers,
    });
    this.requestDuration = new Histogram({
      name: 'kiteline_http_request_duration_seconds',
      help: 'Time to answer an HTTP request (until the response is complete), by route pattern and method',
      labelNames: ['route', 'method'],
      buckets: REQUEST_BUCKETS,
      registers,
    });
    this.upstreamDuration = new Histogram({
      name: 'kiteline_upstream_request_duration_seconds',
      help:
        "Time until a target cluster's response headers, by cluster, method and response code " +
        '(health probes and discovery included)',
      labelNames: ['cluster', 'method', 'code'],
      buckets: UPSTREAM_BUCKETS,
      registers,
    });
    this.sharedReads = new Counter({
      name: 'kiteline_upstream_shared_reads_total',
      help:
        'Object reads answered by an upstream read another identical request also waited for ' +
        '(read coalescing), by cluster',
      labelNames: ['cluster'],
      registers,
    });
    this.loginFailures = new Counter({
      name: 'kiteline_login_failures_total',
      help: 'Failed password logins by reason (bad_credentials, throttled, disabled, bad_request)',
      labelNames: ['reason'],
      registers,
    });
    this.revokedStreams = new Counter({
      name: 'kiteline_streams_revoked_total',
      help:
        'Open streams (exec, attach, port-forward, watches, terminals, logs, event streams) ended because their ' +
        "caller's credentials were revoked (revoked), expired (expired) or no longer allow them (forbidden)",
      labelNames: ['reason'],
      registers,
    });
    this.mcpToolCalls = new Counter({
      name: 'kiteline_mcp_tool_calls_total',
      help: 'MCP tool calls (POST /mcp) by tool and result: success, or failure (refused or failed)',
      labelNames: ['tool', 'result'],
      registers,
    });
    this.recordingFailures = new Counter({
      name: 'kiteline_session_recording_failures_total',
      help: 'Writes of session recordings the host cluster did not take (src/recording/)',
      registers,
    });
    this.recordingDropped = new Counter({
      name: 'kiteline_session_recording_dropped_bytes_total',
      help: 'Bytes of session events not recorded because the host cluster lagged behind the session',
      registers,
    });
    new Gauge({
      name: 'kiteline_cluster_ready',
      help: 'Whether a registered cluster is ready to serve requests on this replica (1) or not (0)',
      labelNames: ['cluster'],
      registers,
      collect() {
        this.reset();
        for (const c of sources.clusters()) this.set({ cluster: c.name }, c.ready ? 1 : 0);
      },
    });
    new Gauge({
      name: 'kiteline_cluster_info',
      help: 'Registered clusters (always 1) with their Kubernetes version and whether they are enabled',
      labelNames: ['cluster', 'version', 'enabled'],
      registers,
      collect() {
        this.reset();
        for (const c of sources.clusters())
          this.set({ cluster: c.name, version: c.version, enabled: String(c.enabled) }, 1);
      },
    });
    this.cachedReads = new Counter({
      name: 'kiteline_read_cache_reads_total',
      help:
        'GETs and LISTs the read cache looked at, by cluster and outcome: hit (answered from the cache) or ' +
        'why it went to the cluster (unsupported, host, cold, target_unsure, target_denied, stale, small, too_large)',
      labelNames: ['cluster', 'outcome'],
      registers,
    });
    this.cacheEvictions = new Counter({
      name: 'kiteline_read_cache_evictions_total',
      help: "Read caches stopped because their cluster's caches held more objects or bytes than allowed",
      labelNames: ['cluster'],
      registers,
    });
    const held = () => this.readCacheHeld();
    for (const [name, help, field] of [
      ['kiteline_read_cache_objects', 'Objects held by the read caches of a cluster', 'objects'],
      ['kiteline_read_cache_bytes', 'Bytes of JSON held by the read caches of a cluster', 'bytes'],
    ] as const) {
      new Gauge({
        name,
        help,
        labelNames: ['cluster'],
        registers,
        collect() {
          this.reset();
          for (const one of held()) this.set({ cluster: one.cluster }, one[field]);
        },
      });
    }
    new Gauge({
      name: 'kiteline_fleet_replicas',
      help: 'Live replicas of this install as this replica sees them (their Leases)',
      registers,
      collect() {
        this.set(sources.fleet().replicas);
      },
    });
    new Gauge({
      name: 'kiteline_fleet_held_clusters',
      help: 'Clusters this replica holds (warm connection, probe, status); the others it reaches through their holder',
      registers,
      collect() {
        this.set(sources.fleet().held);
      },
    });
    new Gauge({
      name: 'kiteline_cache_objects',
      help: 'Objects held by a watch-backed host cache',
      labelNames: ['cache'],
      registers,
      collect() {
        this.reset();
        for (const [cache, size] of Object.entries(sources.cacheSizes())) this.set({ cache }, size);
      },
    });
  }

  /** One answered HTTP request. */
  observeRequest(route: string, method: string, status: number, cluster: string, seconds: number): void {
    this.requests.inc({ route, method, status: String(status), cluster });
    this.requestDuration.observe({ route, method }, seconds);
  }

  /** An UpstreamObserver bound to this object (cheap: one observation per call). */
  readonly observeUpstream: UpstreamObserver = {
    response: (cluster, method, status, seconds) => {
      this.upstreamDuration.observe({ cluster, method, code: String(status) }, seconds);
    },
    sharedReads: (cluster, count) => {
      this.sharedReads.inc({ cluster }, count);
    },
  };

  loginFailed(reason: LoginFailureReason): void {
    this.loginFailures.inc({ reason });
  }

  /** An open stream ended by revocation (auth/open-streams.ts). */
  streamRevoked(reason: 'revoked' | 'expired' | 'forbidden'): void {
    this.revokedStreams.inc({ reason });
  }

  mcpToolCalled(tool: string, result: 'success' | 'failure'): void {
    this.mcpToolCalls.inc({ tool, result });
  }

  /** What session recording reports (src/recording/): a failed write, bytes it could not keep. */
  /** What the read caches report (src/resources/cache/): each read's outcome, evictions. */
  readonly readCache = {
    outcome: (cluster: string, outcome: string) => this.cachedReads.inc({ cluster, outcome }),
    eviction: (cluster: string) => this.cacheEvictions.inc({ cluster }),
  };

  readonly recording = {
    failed: () => this.recordingFailures.inc(),
    dropped: (bytes: number) => this.recordingDropped.inc(bytes),
  };

  /** The exposition text of every metric. */
  scrape(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
