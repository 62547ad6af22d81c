// A cluster another replica holds (fleet.ts): the same ClusterConnection the routes use, whose
// upstream calls go to the holder's internal hop (gateway/routes/fleet-hop.ts), which sends them on
// its warm connection with the cluster's credentials. Everything before the upstream call
// (authentication, authorization, the host guard, audit, this replica's caller limits) happens
// here, as for a cluster of our own; the hop carries only what goes to the cluster.
// The hop is one keep-alive pool per peer, shared by all its clusters, so a request here costs a
// loopback-or-pod-network round trip and never a TLS handshake with the cluster.
// When the holder cannot be reached (it died, its Lease has not expired yet), the holder is
// suspected, the cluster moves to the next replica in line, and a request whose body can be sent
// again is sent to the new holder (or to this replica's own new connection).
import { lookup } from 'node:dns';
import { Readable } from 'node:stream';
import type { Pool } from 'undici';
import { abortError, BadGatewayError, HttpError } from '../errors.js';
import type { ClusterStatus } from '../host/resources.js';
import type { Replica } from '../host/replicas.js';
import { CallerLimits, type CallerLimitOptions } from './caller-limits.js';
import { ConnectionOfCluster, DEMAND_PROBE_SPACING_MS, type ConnectionMeta, type Health } from './connection.js';
import { HOP_HEADER, HOP_PREFIX, type Fleet } from './fleet.js';
import { openUpgrade, type UpgradeAnswer, type UpgradeRequest } from './upgrade.js';
import type {
  BufferedAnswer,
  ClusterConnection,
  ObjectRead,
  ResolvedResource,
  UpstreamRequest,
  UpstreamResponse,
} from './types.js';

/** Options of a hop request, as request headers (the hop reads and drops them). */
export const HOP_OPTION = {
  longRunning: 'x-kiteline-hop-long-running',
  turnKey: 'x-kiteline-hop-turn',
  objectRead: 'x-kiteline-hop-object-read',
  /** Replicas the sender could not reach: the holder passes them over too (else it would not hold the cluster). */
  suspects: 'x-kiteline-hop-suspects',
  /** The replica the sender means: another process at its address (it restarted) refuses at once. */
  holder: 'x-kiteline-hop-holder',
} as const;
/** The hop's answer (HOP_ANSWER) when the replica it reached is not the one the sender meant. */
export const NOT_THIS_REPLICA = 'not-this-replica';
/**
 * The hop's answer when the replica does not hold the cluster (it waited for a while to, or it has
 * just handed it on): the two saw different members (one had not yet listed a replica that joined
 * or left). The request did not run; the sender sends it where it goes once its own view catches up.
 */
export const NOT_HELD = 'not-held';
/** Set on an answer the holder made itself (an error of the hop), not the cluster's. */
export const HOP_ANSWER = 'x-kiteline-hop-answer';

/** Bodies up to this size are kept, so a request can be sent again (the API server takes at most 3 MiB). */
const MAX_KEPT_BODY = 3 * 1024 * 1024;
/** Methods whose request may be sent twice: they change nothing. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** How long a resolved resource is reused before the holder is asked again. */
const RESOLVED_TTL_MS = 60_000;

export interface RemoteOptions {
  fleet: Fleet;
  holder: Replica;
  /** What the held connection is built from: the holder waits for that one (firstProbe). */
  fingerprint: string;
  callerLimits: CallerLimitOptions;
  connectTimeoutMs: number;
  /** The Cluster's status as the holder last wrote it (from the host cache). */
  recorded: () => ClusterStatus | undefined;
  /** After the holder was suspected: the connection that replaced this one, once the reconciler built it. */
  rehome: () => Promise<ClusterConnection | undefined>;
}

export class RemoteConnection extends ConnectionOfCluster implements ClusterConnection {
  readonly holder: Replica;
  private readonly fleet: Fleet;
  private readonly callerLimits: CallerLimits;
  private readonly resolved = new Map<string, { resource: ResolvedResource; at: number }>();
  /** Health the holder answered (first probe), until a status written after it says otherwise. */
  private reported: { health: Health; at: number } | undefined;
  private lastDemandProbe = 0;
  private closed = false;

  constructor(
    meta: ConnectionMeta,
    private readonly options: RemoteOptions,
  ) {
    super(meta);
    this.fleet = options.fleet;
    this.holder = options.holder;
    this.callerLimits = new CallerLimits(options.callerLimits, () => this.name);
  }

  get fingerprint(): string {
    return this.options.fingerprint;
  }
  get currentHealth(): Health {
    const status = this.options.recorded();
    const written = Date.parse(status?.lastProbeTime ?? '') || 0;
    if (this.reported && this.reported.at >= written) return { ...this.reported.health };
    return { ready: status?.ready ?? false, version: status?.version ?? '', error: status?.error ?? 'not probed yet' };
  }
  get ready(): boolean {
    return this.currentHealth.ready;
  }
  get lastError(): string {
    return this.currentHealth.error;
  }
  get version(): string {
    return this.currentHealth.version;
  }

  admit(caller: string, longRunning: boolean): () => void {
    return this.callerLimits.admit(caller, longRunning);
  }

  private hopPath(what: string): string {
    return `${HOP_PREFIX}${encodeURIComponent(this.meta.objectName)}/${what}`;
  }

  /** Adds the hop's signature and the replicas this one suspects. */
  private signed(headers: Record<string, string | string[]>, method: string, path: string) {
    headers[HOP_OPTION.holder] = this.holder.identity;
    const suspects = this.fleet.suspected();
    if (suspects.length > 0) headers[HOP_OPTION.suspects] = suspects.join(',');
    headers[HOP_HEADER] = this.fleet.sign(method, path, headers);
    return headers;
  }

  private pool(): Pool {
    return this.fleet.pool(this.holder.address);
  }

  async request(req: UpstreamRequest): Promise<UpstreamResponse> {
    return this.hop(req, {});
  }

  /**
   * One upstream request through the holder. When the holder is gone (refused, reset, or another
   * process answers at its address), it is suspected, and the request goes once more to the
   * connection that replaced this one if it cannot have reached the cluster yet (never sent, or a
   * read) and its body is still in hand.
   */
  private async hop(req: UpstreamRequest, options: Record<string, string>): Promise<UpstreamResponse> {
    const elsewhere = (moved: ClusterConnection, body: UpstreamRequest['body']) =>
      HOP_OPTION.objectRead in options
        ? moved.readObject({ path: req.path, headers: req.headers ?? {}, signal: req.signal }).then(asResponse)
        : moved.request({ ...req, body });
    if (this.closed) {
      // The cluster moved while this request was being authorized: it goes to where it is now.
      const moved = await this.replacement();
      if (!moved) throw new BadGatewayError(`cluster "${this.name}" moved; retry`);
      return elsewhere(moved, req.body);
    }
    // A body kept in hand can be sent again (one that streams for long, a long-running request's, is not kept).
    const body =
      req.body instanceof Readable && req.longRunning !== true ? await keptBody(req.body, MAX_KEPT_BODY) : req.body;
    const replayable = body === undefined || typeof body === 'string' || Buffer.isBuffer(body);
    const path = this.hopPath(`k8s${req.path}`);
    const headers: Record<string, string | string[]> = { ...options };
    for (const name in req.headers) {
      const lower = name.toLowerCase();
      if (lower !== 'authorization' && lower !== 'host' && !lower.startsWith('x-kiteline-hop'))
        headers[name] = req.headers[name];
    }
    if (req.longRunning !== undefined) headers[HOP_OPTION.longRunning] = req.longRunning ? '1' : '0';
    if (req.turnKey) headers[HOP_OPTION.turnKey] = encodeURIComponent(req.turnKey);
    this.signed(headers, req.method, path);
    let answer;
    try {
      answer = await this.pool().request({ method: req.method, path, headers, body, signal: req.signal });
    } catch (err) {
      const e = err as Error & { code?: string };
      if (!req.signal?.aborted && this.holderGone(e) && replayable && (neverSent(e) || SAFE_METHODS.has(req.method))) {
        const moved = await this.replacement();
        if (moved) return elsewhere(moved, body);
      }
      throw this.failure(e, req.signal, req.method);
    }
    if (answer.headers[HOP_ANSWER] !== undefined) {
      // The request did not run when the holder is not there (another process at its address) or does not hold it.
      const moved = await this.instead(answer.headers[HOP_ANSWER], replayable);
      if (moved) {
        await answer.body.dump();
        return elsewhere(moved, body);
      }
      throw await hopError(answer, this.name);
    }
    return Object.assign(answer.body as Readable, { statusCode: answer.statusCode, headers: answer.headers });
  }

  /** Whether a failed hop means the holder is gone (then it is suspected); not for an abort or an answer. */
  private holderGone(err: Error & { code?: string }): boolean {
    if (err.name === 'AbortError' || !unreachable(err)) return false;
    this.fleet.suspect(this.holder.identity);
    return true;
  }

  /**
   * Where a request the hop answered without running goes instead: for NOT_THIS_REPLICA (another
   * process answered at the holder's address: it restarted) the holder's successor; for NOT_HELD,
   * the connection that replaces this one once this replica's members change.
   */
  private async instead(
    answer: string | string[] | undefined,
    canResend = true,
  ): Promise<ClusterConnection | undefined> {
    if (answer === NOT_THIS_REPLICA) this.fleet.suspect(this.holder.identity);
    // A body that streamed on cannot be sent again: no use waiting for a connection to send it on.
    // For NOT_HELD, this replica's members catch up with the holder's within a list (if they ever do).
    return canResend && (answer === NOT_THIS_REPLICA || answer === NOT_HELD) ? this.replacement() : undefined;
  }

  /** The connection that replaced this one (closed: the cluster moved; or its holder suspected), once there is one. */
  private async replacement(): Promise<ClusterConnection | undefined> {
    const next = await this.options.rehome();
    return next && next !== this ? next : undefined;
  }

  private failure(err: Error & { code?: string }, signal: AbortSignal | undefined, method = 'GET'): Error {
    if (err instanceof HttpError) return err;
    if (signal?.aborted || err.name === 'AbortError') return abortError('the upstream request was aborted', err);
    if (neverSent(err) || SAFE_METHODS.has(method))
      return new BadGatewayError(
        `cluster "${this.name}": the replica holding it did not answer (${err.code ?? err.message})`,
      );
    return new BadGatewayError(
      `cluster "${this.name}": the replica holding it went away during the request (${err.code ?? err.message}); ` +
        'the write may or may not have been applied',
    );
  }

  async readObject(req: ObjectRead): Promise<BufferedAnswer> {
    const res = await this.hop(
      { method: 'GET', path: req.path, headers: req.headers, signal: req.signal },
      { [HOP_OPTION.objectRead]: '1' },
    );
    const chunks: Buffer[] = [];
    for await (const chunk of res) chunks.push(chunk as Buffer);
    return { statusCode: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) };
  }

  async upgrade(req: UpgradeRequest): Promise<UpgradeAnswer> {
    if (this.closed) {
      const moved = await this.replacement();
      if (!moved) throw new BadGatewayError(`cluster "${this.name}" moved; retry`);
      return moved.upgrade(req);
    }
    const basePath = this.hopPath('k8s');
    const headers: Record<string, string | string[]> = {};
    for (const name in req.headers)
      if (!name.toLowerCase().startsWith('x-kiteline-hop')) headers[name] = req.headers[name];
    this.signed(headers, req.method, `${basePath}${req.path}`);
    let answer: UpgradeAnswer;
    try {
      answer = await openUpgrade(
        {
          clusterName: this.name,
          server: new URL(this.holder.address),
          basePath,
          tls: undefined,
          lookup,
          authorization: undefined,
          connectTimeoutMs: this.options.connectTimeoutMs,
        },
        { ...req, headers },
      );
    } catch (err) {
      const e = err as Error & { code?: string };
      const moved = this.holderGone(e) && neverSent(e) ? await this.replacement() : undefined;
      if (moved) return moved.upgrade(req);
      throw err;
    }
    if (answer.headers[HOP_ANSWER] !== undefined) {
      const moved = await this.instead(answer.headers[HOP_ANSWER]);
      if (moved) {
        answer.socket.destroy();
        return moved.upgrade(req);
      }
    }
    return answer;
  }

  async resolveResource(segment: string): Promise<ResolvedResource | undefined> {
    const known = this.resolved.get(segment);
    if (known && Date.now() - known.at < RESOLVED_TTL_MS) return known.resource;
    const answer = (await this.control('GET', `resolve?segment=${encodeURIComponent(segment)}`, async (moved) => ({
      resource: await moved.resolveResource(segment),
    }))) as { resource?: ResolvedResource };
    if (answer.resource) this.resolved.set(segment, { resource: answer.resource, at: Date.now() });
    return answer.resource;
  }

  /** The holder's first probe of the connection built from this fingerprint, and its health. */
  async firstProbe(timeoutMs = this.options.connectTimeoutMs + 1000): Promise<void> {
    try {
      const health = (await this.control(
        'POST',
        `first-probe?fingerprint=${this.options.fingerprint}&wait=${Math.round(timeoutMs)}`,
        async (moved) => void (await moved.firstProbe()),
      )) as Health | undefined;
      if (health) this.reported = { health, at: Date.now() };
    } catch {
      /* the status written later tells */
    }
  }

  probeOnDemand(): void {
    const now = Date.now();
    if (this.closed || now - this.lastDemandProbe < DEMAND_PROBE_SPACING_MS) return;
    this.lastDemandProbe = now;
    this.control('POST', 'probe', async (moved) => moved.probeOnDemand()).catch(() => undefined);
  }

  /**
   * A small JSON call to the holder's hop about this cluster (not a cluster request: it may be
   * sent again); `elsewhere` does the same on the connection that replaced this one.
   */
  private async control(
    method: string,
    what: string,
    elsewhere: (moved: ClusterConnection) => Promise<unknown>,
  ): Promise<unknown> {
    const moved = this.closed ? await this.replacement() : undefined;
    if (moved) return elsewhere(moved);
    const path = this.hopPath(what);
    let answer;
    try {
      answer = await this.pool().request({
        method,
        path,
        headers: this.signed({}, method, path),
        signal: AbortSignal.timeout(this.options.connectTimeoutMs + 15_000),
      });
    } catch (err) {
      const next = this.holderGone(err as Error & { code?: string }) ? await this.replacement() : undefined;
      if (next) return elsewhere(next);
      throw this.failure(err as Error, undefined);
    }
    if (answer.headers[HOP_ANSWER] !== undefined) {
      const next = await this.instead(answer.headers[HOP_ANSWER]);
      if (next) {
        await answer.body.dump();
        return elsewhere(next);
      }
    }
    if (answer.headers[HOP_ANSWER] !== undefined || answer.statusCode !== 200) throw await hopError(answer, this.name);
    return answer.body.json();
  }

  close(): void {
    this.closed = true;
  }
}

/** A failure before the request left: nothing of it reached the holder. */
function neverSent(err: Error & { code?: string }): boolean {
  return ['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT'].includes(err.code ?? '');
}

/** A connection-level failure: the holder is not there (as opposed to an answer or an abort). */
function unreachable(err: Error & { code?: string }): boolean {
  return neverSent(err) || ['ECONNRESET', 'UND_ERR_SOCKET', 'EPIPE'].includes(err.code ?? '');
}

/**
 * A request body read into memory up to `limit` bytes; beyond, a stream of what was read and the
 * rest (such a request cannot be sent twice).
 */
async function keptBody(body: Readable, limit: number): Promise<Buffer | Readable> {
  const chunks: Buffer[] = [];
  let size = 0;
  const source = body[Symbol.asyncIterator]();
  for (;;) {
    const next = await source.next();
    if (next.done) return Buffer.concat(chunks, size);
    const chunk = Buffer.isBuffer(next.value) ? next.value : Buffer.from(next.value as string);
    chunks.push(chunk);
    size += chunk.length;
    if (size > limit)
      return Readable.from(
        (async function* () {
          yield* chunks;
          for (let more = await source.next(); !more.done; more = await source.next()) yield more.value as Buffer;
        })(),
      );
  }
}

/** The error of an answer the hop made itself (it admits nothing, so never a 429): the cluster's 502. */
async function hopError(
  answer: {
    statusCode: number;
    headers: Record<string, string | string[] | undefined>;
    body: { text(): Promise<string> };
  },
  cluster: string,
): Promise<Error> {
  let message = '';
  try {
    message = (JSON.parse(await answer.body.text()) as { error?: string }).error ?? '';
  } catch {
    /* not ours */
  }
  return new BadGatewayError(message || `cluster "${cluster}": the replica holding it answered ${answer.statusCode}`);
}

function asResponse(answer: BufferedAnswer): UpstreamResponse {
  return Object.assign(Readable.from([answer.body]), { statusCode: answer.statusCode, headers: answer.headers });
}
