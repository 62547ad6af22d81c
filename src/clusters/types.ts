// The contract between cluster connections (clusters/) and the resource gateway (gateway/routes).
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { UpgradeAnswer, UpgradeRequest } from './upgrade.js';

/** A resource as the target cluster's discovery describes it. */
export interface ResolvedResource {
  group: string; // "" for the core group
  version: string;
  /** Plural name, e.g. "deployments". */
  resource: string;
  kind: string;
  namespaced: boolean;
  verbs: string[];
}

export interface UpstreamRequest {
  method: string;
  /** Path and query on the cluster's API server, e.g. /apis/apps/v1/namespaces/x/deployments?limit=5 */
  path: string;
  /** Request headers; a list sends one header line per value (e.g. Impersonate-Group). */
  headers?: Record<string, string | string[]>;
  /** A complete body (its Content-Length is set by request()), or a stream piped as is. */
  body?: string | Buffer | Readable;
  /** Aborts the upstream request (e.g. when the client goes away). */
  signal?: AbortSignal;
  /** Writes with the same key (an object's path) go upstream one at a time (write-turns.ts). */
  turnKey?: string;
  /**
   * Holds its connection until one side ends it (a watch, `logs -f`, a proxied stream): it goes on
   * the watch pool. Undefined: a watch when the query says `watch=true`.
   */
  longRunning?: boolean;
  /** Only on this connection, also once it is retired (the hop: its sender sends the request on). */
  here?: boolean;
}

/**
 * A cluster's answer: the body stream (iterate or pipe it; destroy it to drop the rest) carrying
 * the status code and the response headers (lower-case names).
 */
export type UpstreamResponse = Readable & { statusCode: number; headers: IncomingHttpHeaders };

/** An upstream answer read whole (status, headers, body), shareable between requests. */
export interface BufferedAnswer {
  statusCode: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** Told what upstream requests did (metrics): response times and shared object reads. */
export interface UpstreamObserver {
  /** Time until a cluster's response headers. */
  response(cluster: string, method: string, status: number, seconds: number): void;
  /** `count` object reads were answered by a read another request also waited for. */
  sharedReads(cluster: string, count: number): void;
}

/** A GET of one object, answered whole (see ClusterConnection.readObject). */
export interface ObjectRead {
  /** Path and query on the cluster's API server. */
  path: string;
  headers: Record<string, string | string[]>;
  /** Aborts this caller's wait (and the upstream read once nobody else waits for it). */
  signal?: AbortSignal;
  /** Only on this connection, also once it is retired (the hop: its sender sends the request on). */
  here?: boolean;
}

/** One warm connection to a registered cluster (keep-alive pool, credentials, discovery, health). */
export interface ClusterConnection {
  readonly id: number;
  readonly name: string;
  readonly enabled: boolean;
  /** Health as last probed. */
  readonly ready: boolean;
  readonly lastError: string;
  /** The cluster's gitVersion, "" when unknown. */
  readonly version: string;
  /** Send Impersonate-User/Group for the caller. */
  readonly impersonate: boolean;
  /** The cluster's Prometheus (spec.prometheusURL), "" when it has none (src/monitoring/). */
  readonly prometheusURL: string;
  /** Labelled production (kiteline.io/production=true): an agent's writes there always ask a human. */
  readonly production: boolean;
  /** Labelled kiteline.io/step-up-minutes: dangerous actions need a second factor proved within these minutes. */
  readonly stepUpMinutes?: number;
  /**
   * Sends one request on the keep-alive pool with the cluster's credentials and resolves with
   * the response head (the body streams). Fails with BadGatewayError within the connect timeout
   * when the cluster cannot be reached.
   */
  request(req: UpstreamRequest): Promise<UpstreamResponse>;
  /**
   * GET of one object, its answer (any status) read whole. Identical reads waiting at the same
   * time share one upstream read when coalescing is on; each answer still comes from a read
   * started after its request arrived (read-coalescer.ts).
   */
  readObject(req: ObjectRead): Promise<BufferedAnswer>;
  /**
   * Sends an HTTP/1.1 Upgrade request (exec, attach, port-forward) on a socket of its own with the
   * cluster's credentials, and resolves with the answer's head and that socket (clusters/upgrade.ts).
   */
  upgrade(req: UpgradeRequest): Promise<UpgradeAnswer>;
  /**
   * Takes one of the caller's slots on this cluster for a request: a long-running one (a watch, a
   * delete that waits) or another; throws TooManyRequestsError (429) when all of that kind are in
   * use. Returns the function that gives the slot back.
   */
  admit(caller: string, longRunning: boolean): () => void;
  /** Asks for a health probe soon because a request wanted this not-ready cluster (rate-limited). */
  probeOnDemand(): void;
  /**
   * Resolves once the connection's first health probe has finished (at once afterwards), or after
   * about the connect timeout while it still runs: a cluster just registered is not "not ready".
   */
  firstProbe(): Promise<void>;
  /**
   * Resolves a path segment ("deployments", "deploy"? no: plural names only, or
   * "<plural>.<group>") through the cached discovery, refreshing it on a miss (rate-limited).
   * Core and built-in groups win a plural-name clash, as kubectl does.
   */
  resolveResource(segment: string): Promise<ResolvedResource | undefined>;
}

/** All warm connections of this replica, kept current by the reconciler. */
export interface ClusterDirectory {
  get(name: string): ClusterConnection | undefined;
  /** The default cluster, if one is marked. */
  defaultCluster(): ClusterConnection | undefined;
  list(): ClusterConnection[];
  /**
   * For a miss of get() (or of defaultCluster(), without a name): a cluster this replica is still
   * connecting at start-up, or one the API server has that this replica's watch has not brought
   * yet (applied with kubectl a moment ago). Undefined when there is none. Only for misses: it may
   * wait, and it may read the host.
   */
  lookUp?(name: string | undefined): Promise<ClusterConnection | undefined>;
}
