// One warm connection to a registered cluster: keep-alive connection pools carrying the cluster's
// CA and client certificate, its bearer token (or basic auth), a discovery cache, and a health
// probe that runs on an interval with backoff while the cluster fails. Each replica keeps its own
// connections; the reconciler creates, updates and closes them.
//
// One reader cannot exhaust a cluster: watches (long-running) go on a pool of
// their own, so however many are open the requests of others still find a connection; the probe
// has a connection of its own, so a busy cluster is not reported down; and every caller has a
// bounded number of slots of each kind (caller-limits.ts).
//
// Why undici and not node:http/https: the upstream request is the gateway's hot path, and Node's
// http client (request object, agent bookkeeping, header parsing) was about half of the gateway's
// busy time in a CPU profile; undici's Pool does the same HTTP/1.1 keep-alive work for much less.
import { EventEmitter } from 'node:events';
import type { LookupFunction } from 'node:net';
import type { Readable } from 'node:stream';
import { createSecureContext, type SecureContext } from 'node:tls';
import { Client, Pool, type Dispatcher } from 'undici';
import { guardedLookup, REFUSED_WHY, refusedAddress } from '../credentials/refused-addresses.js';
import { abortError, BadGatewayError, HttpError } from '../errors.js';
import type { Cluster } from '../host/clusters.js';
import type { Logger } from '../log.js';
import { CallerLimits, type CallerLimitOptions } from './caller-limits.js';
import { loadDiscovery, type DiscoverySnapshot } from './discovery.js';
import { ReadCoalescer } from './read-coalescer.js';
import { openUpgrade, type UpgradeAnswer, type UpgradeRequest } from './upgrade.js';
import { WriteTurns } from './write-turns.js';
import type { ConnectionTarget } from './target.js';
import { within } from '../within.js';
import type {
  BufferedAnswer,
  ClusterConnection,
  ObjectRead,
  ResolvedResource,
  UpstreamObserver,
  UpstreamRequest,
  UpstreamResponse,
} from './types.js';

/** What the Cluster object says about this connection (changes without a reconnect). */
export type ConnectionMeta = Pick<
  Cluster,
  | 'objectName'
  | 'id'
  | 'name'
  | 'enabled'
  | 'impersonate'
  | 'isDefault'
  | 'defaultSince'
  | 'inCluster'
  | 'source'
  | 'prometheusURL'
  | 'production'
  | 'stepUpMinutes'
>;

export interface ConnectionOptions {
  /** Where and how to connect: from a sanitized kubeconfig, or the host's own config. */
  target: ConnectionTarget;
  connectTimeoutMs: number;
  probeIntervalMs: number;
  /** Identical concurrent object reads share one upstream read (see read-coalescer.ts). */
  coalesceReads: boolean;
  /** Writes to one object take turns (see write-turns.ts). */
  writeTurns: boolean;
  /** Slots each caller has on this cluster (see caller-limits.ts). */
  callerLimits: CallerLimitOptions;
  /** Resolves the server's host name (DNS when absent; tests give their own). Always guarded. */
  lookup?: LookupFunction;
  log: Logger;
  /** Once retired: the connection that replaced it (the reconciler's), for requests that arrive after. */
  rehome?: () => Promise<ClusterConnection | undefined>;
}

export interface Health {
  ready: boolean;
  version: string;
  error: string;
}

/** A request reached a connection that was retired or closed before it left: it never reached the cluster. */
export class ConnectionClosedError extends BadGatewayError {
  constructor(cluster: string) {
    super(`cluster "${cluster}" connection was closed; retry`);
  }
}

/** Smallest gap between two discovery refreshes of one cluster (misses wait for the next slot). */
const DISCOVERY_MIN_INTERVAL_MS = 200;
/** A full discovery refresh at least this often even without misses. */
const DISCOVERY_MAX_AGE_MS = 5 * 60_000;
/** How long a probe or discovery read may take in all. */
const READ_TIMEOUT_MS = 15_000;

/**
 * Largest object answer read whole. The API server keeps objects below about 1.5 MiB (etcd's
 * request limit) and bodies below 3 MiB; this only bounds what a misbehaving server could send.
 */
const MAX_OBJECT_BYTES = 32 * 1024 * 1024;

/** Connections of the pool for requests that end by themselves (watches have a pool of their own). */
const REQUEST_CONNECTIONS = 256;

/** What the API server reads as `watch=true` (Go's strconv.ParseBool). */
const WATCH_TRUE = new Set(['1', 't', 'T', 'true', 'TRUE', 'True']);

/** A watch is long-running: it holds its connection until one side ends it. */
function isWatch(path: string): boolean {
  const query = path.indexOf('?');
  return query >= 0 && WATCH_TRUE.has(new URLSearchParams(path.slice(query + 1)).get('watch') ?? '');
}

/** How long a replaced connection's long-running requests may go on (their clients then watch again). */
const RETIRE_GRACE_MS = 30_000;

/** Least time between two probes that requests for a not-ready cluster trigger. */
export const DEMAND_PROBE_SPACING_MS = 1000;

/**
 * How much longer than the connect timeout a caller waits for a first probe: the time its
 * /version answer and the first discovery take once the connection stands.
 */
export const FIRST_PROBE_GRACE_MS = 1000;

/**
 * What every connection of the registry answers from its Cluster object (changed without a
 * reconnect): this replica's warm ones, and remote-connection.ts's for clusters held elsewhere.
 */
export abstract class ConnectionOfCluster extends EventEmitter {
  /** Told response times and shared reads (metrics); the registry sets it. */
  upstreamObserver: UpstreamObserver | undefined;

  constructor(public meta: ConnectionMeta) {
    super();
  }

  get id(): number {
    return this.meta.id;
  }
  get name(): string {
    return this.meta.name;
  }
  get enabled(): boolean {
    return this.meta.enabled;
  }
  get impersonate(): boolean {
    return this.meta.impersonate;
  }
  get prometheusURL(): string {
    return this.meta.prometheusURL;
  }
  get production(): boolean {
    return this.meta.production;
  }
  get stepUpMinutes(): number | undefined {
    return this.meta.stepUpMinutes;
  }
}

export class WarmConnection extends ConnectionOfCluster implements ClusterConnection {
  private health: Health = { ready: false, version: '', error: 'not probed yet' };
  private readonly target: ConnectionTarget;
  private readonly server: URL;
  private readonly basePath: string;
  /**
   * Callers' requests that end by themselves (reads, lists, writes), and long-running ones
   * (watches: as many connections as there are watches). Each made at its first request: an undici
   * Pool holds a queue of 2,048 slots from the start, 16 KiB that a cluster nobody uses would keep.
   */
  private requestPool: Pool | undefined;
  private longPool: Pool | undefined;
  private readonly dispatcherOptions: Pool.Options;
  /**
   * The cluster's own bookkeeping, apart from callers' requests: the health probe and discovery,
   * on one connection of their own (so a busy cluster is not reported down). An idle cluster keeps
   * only this one.
   */
  private readonly control: Client;
  /** Resolves the server's name for every socket, refusing link-local and metadata addresses. */
  private readonly lookup: LookupFunction;
  /** The TLS options of every socket to the cluster (undefined over plain http). */
  private readonly tls: ReturnType<WarmConnection['tlsOptions']> | undefined;
  private readonly callerLimits: CallerLimits;
  private readonly connectTimeoutMs: number;
  private readonly probeIntervalMs: number;
  private readonly log: Logger;
  /** Undefined when coalescing is off: every object read is its own upstream read. */
  private readonly reads: ReadCoalescer | undefined;
  /** Undefined when write turns are off: writes to one object go upstream at once. */
  private readonly turns: WriteTurns | undefined;
  private discovery: DiscoverySnapshot | undefined;
  private discoveryAt = 0;
  private discoveryInFlight: Promise<void> | undefined;
  private probeTimer: NodeJS.Timeout | undefined;
  private failures = 0;
  private probing = false;
  private probeGeneration = 0;
  private probeInFlight = false;
  private lastDemandProbe = 0;
  private closed = false;
  /** Replaced (retire()), as opposed to closed for good: requests go on to the replacement. */
  private retired = false;
  private readonly rehome: ConnectionOptions['rehome'];
  /** Settles when the first probe has finished (or the connection was closed before it did). */
  private readonly firstProbeDone: Promise<void>;
  private endFirstProbe!: () => void;
  private probedOnce = false;

  /** Throws when the TLS material is unusable (bad PEM). */
  constructor(meta: ConnectionMeta, options: ConnectionOptions) {
    super(meta);
    this.target = options.target;
    this.connectTimeoutMs = options.connectTimeoutMs;
    this.probeIntervalMs = options.probeIntervalMs;
    this.rehome = options.rehome;
    this.log = options.log.child({ cluster: meta.name });
    this.firstProbeDone = new Promise((resolve) => (this.endFirstProbe = resolve));
    this.turns = options.writeTurns ? new WriteTurns() : undefined;
    this.reads = options.coalesceReads
      ? new ReadCoalescer((count) => this.upstreamObserver?.sharedReads(this.meta.name, count))
      : undefined;
    this.server = new URL(this.target.server);
    this.basePath = this.server.pathname.replace(/\/+$/, '');
    this.callerLimits = new CallerLimits(options.callerLimits, () => this.name);
    // Never a link-local or metadata address (refused-addresses.ts): the kubeconfig check refused
    // such a server already; this also covers the host's own config. Names are checked as they
    // resolve, on every new socket, so a DNS answer that changes later cannot take us there.
    if (refusedAddress(this.server.hostname)) throw new Error(`server ${this.server.hostname} is ${REFUSED_WHY}`);
    this.lookup = guardedLookup(options.lookup);
    this.tls = this.server.protocol === 'https:' ? this.tlsOptions() : undefined;
    // Keep-alive connections with the cluster's TLS material. No headers or body timeouts: a watch
    // may stay silent for minutes, and the callers' signals end what must end.
    const dispatcher = {
      keepAliveTimeout: 30_000,
      headersTimeout: 0,
      bodyTimeout: 0,
      connect: {
        timeout: this.connectTimeoutMs,
        lookup: this.lookup,
        ...this.tls,
      },
    };
    this.dispatcherOptions = dispatcher;
    this.control = new Client(this.server.origin, dispatcher);
  }

  private get pool(): Pool {
    return (this.requestPool ??= new Pool(this.server.origin, {
      ...this.dispatcherOptions,
      connections: REQUEST_CONNECTIONS,
    }));
  }

  private get watchPool(): Pool {
    return (this.longPool ??= new Pool(this.server.origin, { ...this.dispatcherOptions, connections: null }));
  }

  /** The dispatchers made so far. */
  private dispatchers(): Dispatcher[] {
    return [this.requestPool, this.longPool, this.control].filter((d): d is Pool | Client => d !== undefined);
  }

  /**
   * The TLS options of the pool: one secure context built (and checked) once, so a bad PEM fails
   * here with a clear message instead of on every connect.
   */
  private tlsOptions(): { secureContext: SecureContext; rejectUnauthorized: boolean; servername?: string } {
    let secureContext;
    try {
      secureContext = createSecureContext({ ca: this.target.ca, cert: this.target.cert, key: this.target.key });
    } catch (err) {
      throw new Error(`unusable TLS material: ${(err as Error).message}`);
    }
    return {
      secureContext,
      rejectUnauthorized: !this.target.insecureSkipTlsVerify,
      ...(this.target.tlsServerName ? { servername: this.target.tlsServerName } : {}),
    };
  }

  get ready(): boolean {
    return this.health.ready;
  }
  get lastError(): string {
    return this.health.error;
  }
  get version(): string {
    return this.health.version;
  }
  get currentHealth(): Health {
    return { ...this.health };
  }
  /** The first probe has finished (until then the health says nothing about the cluster). */
  get probed(): boolean {
    return this.probedOnce;
  }
  /** The API server URL (no credentials), for status messages. */
  get serverUrl(): string {
    return this.server.toString().replace(/\/$/, '');
  }

  /**
   * Takes one of the caller's slots on this cluster (429 when theirs are all taken); the returned
   * function gives it back. `longRunning`: a watch, or a delete that waits.
   */
  admit(caller: string, longRunning: boolean): () => void {
    return this.callerLimits.admit(caller, longRunning);
  }

  request(req: UpstreamRequest): Promise<UpstreamResponse> {
    if (this.retired && !req.here) return this.onReplacement((next) => next.request(req));
    return this.send((req.longRunning ?? isWatch(req.path)) ? this.watchPool : this.pool, req);
  }

  /** One request on the given pool or connection, with the cluster's credentials. */
  private async send(dispatcher: Dispatcher, req: UpstreamRequest): Promise<UpstreamResponse> {
    if (this.closed) throw new ConnectionClosedError(this.name);
    const authorization = await this.target.authorization();
    const headers: Record<string, string | string[]> = {};
    const given = req.headers;
    for (const k in given) {
      if (k.toLowerCase() !== 'authorization') headers[k] = given[k];
    }
    if (authorization) headers.authorization = authorization;
    // A write waits for its object's turn (the turn ends once the response headers are here).
    const endTurn = req.turnKey && this.turns ? await this.turns.take(req.turnKey, req.signal) : undefined;
    const started = this.upstreamObserver ? performance.now() : 0;
    let answer;
    try {
      // A complete body (string or Buffer) is framed by its Content-Length; a stream goes chunked.
      answer = await dispatcher.request({
        method: req.method,
        path: this.basePath + req.path,
        headers,
        body: req.body,
        signal: req.signal,
      });
    } catch (err) {
      throw this.requestError(err as Error & { code?: string }, req.signal);
    } finally {
      endTurn?.();
    }
    this.upstreamObserver?.response(
      this.meta.name,
      req.method,
      answer.statusCode,
      (performance.now() - started) / 1000,
    );
    // The body stream carries the status and headers, so callers read one object (as with Node's
    // IncomingMessage): iterate or pipe it, destroy it to drop the rest.
    return Object.assign(answer.body as Readable, {
      statusCode: answer.statusCode,
      headers: answer.headers,
    });
  }

  /**
   * An HTTP/1.1 Upgrade (exec, attach, port-forward) on a socket of its own, with the cluster's TLS material
   * and credentials.
   */
  async upgrade(req: UpgradeRequest): Promise<UpgradeAnswer> {
    if (this.retired && !req.here) return this.onReplacement((next) => next.upgrade(req));
    if (this.closed) throw new ConnectionClosedError(this.name);
    const authorization = await this.target.authorization();
    return openUpgrade(
      {
        clusterName: this.name,
        server: this.server,
        basePath: this.basePath,
        tls: this.tls,
        lookup: this.lookup,
        authorization,
        connectTimeoutMs: this.connectTimeoutMs,
      },
      req,
    );
  }

  async readObject(req: ObjectRead): Promise<BufferedAnswer> {
    if (this.retired && !req.here) return this.onReplacement((next) => next.readObject(req));
    const { path, headers, signal } = req;
    if (!this.reads) return this.readWhole(path, headers, signal);
    const key = `${path}\n${JSON.stringify(headers)}`;
    return this.reads.read(key, (batchSignal) => this.readWhole(path, headers, batchSignal), signal);
  }

  /**
   * One GET whose answer (any status) is read whole, up to MAX_OBJECT_BYTES (objects, probes,
   * discovery), on the callers' pool unless another is given (the probe's and discovery's own).
   */
  private async readWhole(
    path: string,
    headers: ObjectRead['headers'],
    signal: AbortSignal | undefined,
    dispatcher: Dispatcher = this.pool,
  ): Promise<BufferedAnswer> {
    const res = await this.send(dispatcher, { method: 'GET', path, headers, signal });
    // Plain 'data' events rather than an async iterator: this runs for every object read, and the
    // iterator's promise per chunk is measurable there.
    const body = await new Promise<Buffer>((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size <= MAX_OBJECT_BYTES) return void chunks.push(chunk);
        const limit = MAX_OBJECT_BYTES / 1024 / 1024;
        res.destroy(new BadGatewayError(`cluster "${this.name}" answered ${path} with more than ${limit} MiB`));
      });
      res.once('end', () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size)));
      res.once('error', (err) => reject(this.requestError(err, signal)));
    });
    return { statusCode: res.statusCode, headers: res.headers, body };
  }

  /**
   * A request that took this connection just before it was replaced (the cluster moved to another
   * replica, or its kubeconfig changed) goes to the replacement: it never reached the cluster here.
   */
  private async onReplacement<T>(use: (next: ClusterConnection) => Promise<T>): Promise<T> {
    const next = await this.rehome?.();
    if (!next || next === this) throw new ConnectionClosedError(this.name);
    return use(next);
  }

  /** The error a failed upstream request rejects with: aborts stay aborts, the rest is a 502. */
  private requestError(err: Error & { code?: string }, signal: AbortSignal | undefined): Error {
    if (err instanceof HttpError) return err;
    if (signal?.aborted || err.name === 'AbortError') return abortError('the upstream request was aborted', err);
    // Retired while the request waited (for credentials, for its turn): the closed pool refused it.
    if (this.closed && err.code === 'UND_ERR_CLOSED') return new ConnectionClosedError(this.name);
    if (err.code === 'UND_ERR_CONNECT_TIMEOUT') {
      return new BadGatewayError(
        `cluster "${this.name}" did not accept a connection within ${this.connectTimeoutMs} ms`,
      );
    }
    return new BadGatewayError(`cluster "${this.name}" is unreachable: ${err.message || err.code}`);
  }

  /** GET a path and parse its JSON; non-2xx answers and slow bodies become errors. */
  private async getJson(
    path: string,
    dispatcher: Dispatcher = this.pool,
    accept = 'application/json',
  ): Promise<unknown> {
    const text = await this.getText(path, dispatcher, accept);
    try {
      return JSON.parse(text);
    } catch {
      throw new BadGatewayError(`cluster "${this.name}" answered ${path} with something that is not JSON`);
    }
  }

  /** GET a path and answer its body as text; non-2xx answers and slow bodies become errors. */
  private async getText(path: string, dispatcher: Dispatcher, accept: string): Promise<string> {
    const answer = await this.readWhole(path, { accept }, AbortSignal.timeout(READ_TIMEOUT_MS), dispatcher);
    const text = answer.body.toString('utf8');
    const status = answer.statusCode;
    if (status < 200 || status >= 300) {
      let message = '';
      try {
        message = (JSON.parse(text) as { message?: string }).message ?? '';
      } catch {
        /* not a Status */
      }
      throw new BadGatewayError(`cluster "${this.name}" answered ${status} on ${path}${message ? `: ${message}` : ''}`);
    }
    return text;
  }

  async resolveResource(segment: string): Promise<ResolvedResource | undefined> {
    if (!this.discovery || Date.now() - this.discoveryAt > DISCOVERY_MAX_AGE_MS) await this.refreshDiscovery();
    const found = this.discovery?.index.resolve(segment);
    if (found) return found;
    await this.refreshDiscovery();
    return this.discovery?.index.resolve(segment);
  }

  /**
   * Reloads discovery: concurrent callers share one load, and loads are at least
   * DISCOVERY_MIN_INTERVAL_MS apart (a caller inside the gap waits for the next slot).
   * Throws BadGatewayError only when there is no discovery at all.
   */
  refreshDiscovery(): Promise<void> {
    if (this.discoveryInFlight) return this.discoveryInFlight;
    const wait = Math.max(0, this.discoveryAt + DISCOVERY_MIN_INTERVAL_MS - Date.now());
    this.discoveryInFlight = (async () => {
      try {
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        this.discoveryAt = Date.now();
        // As text: clusters that answer the same discovery share one snapshot (discovery.ts).
        const snapshot = await loadDiscovery((path, accept) => this.getText(path, this.control, accept));
        if (this.closed) return;
        if (snapshot.failed.length > 0 && snapshot.failed.join() !== this.discovery?.failed.join()) {
          this.log.warn({ failedGroupVersions: snapshot.failed }, 'some API groups failed discovery; skipped');
        }
        this.discovery = snapshot;
      } catch (err) {
        if (!this.discovery)
          throw err instanceof HttpError
            ? err
            : new BadGatewayError(`cluster "${this.name}" discovery failed: ${(err as Error).message}`);
      } finally {
        this.discoveryInFlight = undefined;
      }
    })();
    return this.discoveryInFlight;
  }

  /**
   * Resolves once the first health probe has finished, or after `timeoutMs` (by default the connect
   * timeout plus FIRST_PROBE_GRACE_MS) while it is still running; at once when it has finished. So
   * a cluster registered a moment ago is waited for instead of reported "not probed yet".
   */
  async firstProbe(timeoutMs = this.connectTimeoutMs + FIRST_PROBE_GRACE_MS): Promise<void> {
    if (!this.probedOnce) await within(this.firstProbeDone, timeoutMs);
  }

  /** Probes now (GET /version), then on the interval, backing off while failing. */
  startProbing(): void {
    if (this.closed || this.probing) return;
    void this.probeLoop();
  }

  /**
   * A request arrived for this cluster while it is not ready: probe now instead of waiting out the
   * backoff (up to 30 s), at most once per DEMAND_PROBE_SPACING_MS and never beside a running
   * probe, so a cluster that is back is served again within about a second.
   */
  probeOnDemand(): void {
    const now = Date.now();
    if (this.closed || this.health.ready || this.probeInFlight || now - this.lastDemandProbe < DEMAND_PROBE_SPACING_MS)
      return;
    this.lastDemandProbe = now;
    this.probeNow();
  }

  /** Probes at once (e.g. after the Secret changed) and reschedules. */
  probeNow(): void {
    if (this.closed) return;
    clearTimeout(this.probeTimer);
    void this.probeLoop();
  }

  private async probeLoop(): Promise<void> {
    this.probing = true;
    const generation = ++this.probeGeneration;
    const next = await this.probe();
    if (this.closed || generation !== this.probeGeneration) return; // a newer loop took over
    const delay = next.ready
      ? this.probeIntervalMs
      : Math.min(this.probeIntervalMs * 2 ** Math.min(this.failures - 1, 3), Math.max(this.probeIntervalMs, 30_000));
    clearTimeout(this.probeTimer);
    this.probeTimer = setTimeout(() => void this.probeLoop(), delay);
    this.probeTimer.unref();
  }

  /** One health check; updates health and emits 'health' when it changed. */
  async probe(): Promise<Health> {
    let next: Health;
    this.probeInFlight = true;
    try {
      const info = (await this.getJson('/version', this.control)) as { gitVersion?: unknown };
      const version = typeof info?.gitVersion === 'string' ? info.gitVersion : '';
      // Discovery is read when a request first needs it (resolveResource), not here: an idle
      // cluster holds none, and a thousand clusters starting take one request each.
      if (version !== this.health.version) this.discovery = undefined;
      next = { ready: true, version, error: '' };
      this.failures = 0;
    } catch (err) {
      this.failures++;
      next = { ready: false, version: this.health.version, error: (err as Error).message };
    } finally {
      this.probeInFlight = false;
    }
    if (this.closed) return next;
    const changed =
      next.ready !== this.health.ready || next.version !== this.health.version || next.error !== this.health.error;
    this.health = next;
    this.probedOnce = true;
    this.endFirstProbe();
    if (changed) {
      this.log.info(
        { ready: next.ready, version: next.version, error: next.error || undefined },
        'cluster health changed',
      );
      this.emit('health', next);
    }
    return next;
  }

  /**
   * Replaced (its cluster moved to another replica, or its kubeconfig changed): no new requests;
   * the ones in flight finish, and long-running ones (watches) are cut after RETIRE_GRACE_MS.
   */
  retire(): void {
    if (this.closed) return;
    this.closed = true;
    this.retired = true;
    this.endFirstProbe();
    clearTimeout(this.probeTimer);
    // Discovery reads in flight on the control client finish too.
    const callers = [this.requestPool, this.longPool, this.control].filter((d): d is Pool | Client => d !== undefined);
    for (const dispatcher of callers) dispatcher.close().catch(() => undefined);
    const cut = setTimeout(() => {
      for (const dispatcher of callers) dispatcher.destroy().catch(() => undefined);
    }, RETIRE_GRACE_MS);
    cut.unref();
    this.removeAllListeners();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.endFirstProbe();
    clearTimeout(this.probeTimer);
    for (const dispatcher of this.dispatchers()) dispatcher.destroy().catch(() => undefined);
    this.removeAllListeners();
  }
}
