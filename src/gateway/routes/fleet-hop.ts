// The internal hop: how a replica reaches a cluster another replica holds (clusters/fleet.ts,
// clusters/remote-connection.ts). Only replicas can call it: every request carries a signature
// (x-kiteline-hop) over its method and path, made with a key derived from the session key, which
// only replicas read; anything else gets 401 before a byte of its body is read. The sender has
// already authenticated and authorized the caller; the hop sends the upstream request on this
// replica's warm connection, with the impersonation headers the sender chose.
//   <method> /internal/fleet/<object>/k8s/<path>   the cluster request (streams both ways)
//   GET  /internal/fleet/<object>/resolve?segment=  discovery: a path segment's resource
//   POST /internal/fleet/<object>/first-probe       waits for the connection's first probe: its health
//   POST /internal/fleet/<object>/probe             a probe soon (a request wanted a not-ready cluster)
// Upgrades (exec, attach, port-forward) under the same prefix are claimed before routing.
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { HOP_HEADER, HOP_PREFIX } from '../../clusters/fleet.js';
import { HOP_ANSWER, HOP_OPTION, NOT_HELD, NOT_THIS_REPLICA } from '../../clusters/remote-connection.js';
import { ConnectionClosedError, type WarmConnection } from '../../clusters/connection.js';
import { BadRequestError, ServiceUnavailableError, UnauthorizedError } from '../../errors.js';
import { toHttpError } from '../plugins/errors.js';

/** The sender meant another replica: the one that was at this address before this process (it restarted). */
class NotThisReplicaError extends ServiceUnavailableError {
  constructor(meant: string, me: string) {
    super(`this is replica ${me}, not ${meant}: that one is gone`);
  }
}

/** This replica does not hold the cluster (after HOLD_WAIT_MS): the sender and it see different members. */
class NotHeldError extends ServiceUnavailableError {
  constructor(objectName: string) {
    super(`cluster object "${objectName}" is not held by this replica`);
  }
}

/**
 * The HOP_ANSWER of an error: whether the request ran, and why not. A connection retired while the
 * request was on its way to it (the cluster was just handed on) is one this replica no longer holds.
 */
function hopAnswer(err: unknown): string {
  if (err instanceof NotThisReplicaError) return NOT_THIS_REPLICA;
  return err instanceof NotHeldError || err instanceof ConnectionClosedError ? NOT_HELD : '1';
}

/** The longest the hop waits for this replica to hold a cluster its sender says it holds. */
const HOLD_WAIT_MS = 2_000;
/** Then, when it does hold it, the longest it waits for its connection to be built. */
const BUILD_WAIT_MS = 8_000;
/** Headers that never cross the hop onto the cluster request. */
const NOT_FORWARDED = new Set(['host', 'connection', 'keep-alive', 'transfer-encoding', 'authorization', 'cookie']);

/** The object name and the cluster path of a hop URL, e.g. /internal/fleet/c1/k8s/api/v1/pods. */
function parseHopUrl(url: string): { objectName: string; rest: string } {
  const tail = url.slice(HOP_PREFIX.length);
  const slash = tail.indexOf('/');
  if (slash <= 0) throw new BadRequestError('not a hop path');
  return { objectName: decodeURIComponent(tail.slice(0, slash)), rest: tail.slice(slash + 1) };
}

/**
 * The sender's headers for the cluster request, each with every value it had: node:http joins the
 * lines of a repeated header with ", ", which would make two Impersonate-Group lines one group.
 */
function upstreamHeaders(req: IncomingMessage): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, values] of Object.entries(req.headersDistinct)) {
    if (values === undefined || NOT_FORWARDED.has(name) || name.startsWith('x-kiteline-hop')) continue;
    out[name] = values.length === 1 ? values[0] : values;
  }
  return out;
}

export default async function fleetHopRoutes(app: FastifyInstance) {
  const { clusterManager } = app.services;
  const fleet = clusterManager.fleet;

  /**
   * The signature; that the sender means this replica (not a process that was at this address
   * before); then the sender's suspicions (replicas it could not reach).
   */
  function admitHop(req: IncomingMessage): void {
    if (!fleet.verify(req.headers[HOP_HEADER], req.method ?? '', req.url ?? '', req.headersDistinct))
      throw new UnauthorizedError('the internal hop is for kiteline replicas only');
    const meant = req.headers[HOP_OPTION.holder];
    if (typeof meant === 'string' && meant !== fleet.identity) throw new NotThisReplicaError(meant, fleet.identity);
    clusterManager.adoptSuspicions(req.headers[HOP_OPTION.suspects]);
  }

  async function held(objectName: string, fingerprint?: string): Promise<WarmConnection> {
    let conn = await clusterManager.heldConnection(objectName, fingerprint, HOLD_WAIT_MS);
    // This replica holds it but has not built its connection yet (it has just joined, with many to build).
    if (!conn && fleet.holds(objectName))
      conn = await clusterManager.heldConnection(objectName, fingerprint, BUILD_WAIT_MS);
    if (!conn) throw new NotHeldError(objectName);
    return conn;
  }

  // The body stays the raw request stream: it is piped upstream.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));
  app.addHook('onRequest', async (request) => admitHop(request.raw));
  app.setErrorHandler((err, request, reply) => {
    const known = toHttpError(err);
    if (!known) request.log.error({ err }, 'unhandled error on the internal hop');
    return reply
      .code(known?.status ?? 500)
      .header(HOP_ANSWER, hopAnswer(err))
      .type('application/json')
      .send({ error: known?.message ?? 'internal error', reason: known?.reason ?? 'InternalError' });
  });

  async function forward(request: FastifyRequest, reply: FastifyReply) {
    const { objectName, rest } = parseHopUrl(request.raw.url ?? '');
    const path = rest.slice('k8s'.length);
    const conn = await held(objectName);
    const controller = new AbortController();
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) controller.abort();
    });
    const headers = upstreamHeaders(request.raw);
    if (request.headers[HOP_OPTION.objectRead] === '1') {
      const answer = await conn.readObject({ path, headers, signal: controller.signal, here: true });
      return reply.code(answer.statusCode).headers(responseHeaders(answer.headers)).send(answer.body);
    }
    const longRunning = request.headers[HOP_OPTION.longRunning];
    const turnKey = request.headers[HOP_OPTION.turnKey];
    const hasBody =
      request.headers['content-length'] !== undefined || request.headers['transfer-encoding'] !== undefined;
    const res = await conn.request({
      method: request.method,
      path,
      headers,
      body: hasBody ? request.raw : undefined,
      signal: controller.signal,
      here: true,
      longRunning: longRunning === undefined ? undefined : longRunning === '1',
      turnKey: typeof turnKey === 'string' ? decodeURIComponent(turnKey) : undefined,
    });
    reply.code(res.statusCode).headers(responseHeaders(res.headers));
    if (res.headers['content-length'] === undefined) reply.raw.once('pipe', () => reply.raw.flushHeaders());
    return reply.send(res);
  }

  const hidden = { schema: { hide: true } };
  app.all('/:object/k8s/*', hidden, forward);
  app.all('/:object/k8s', hidden, forward);
  app.get<{ Params: { object: string }; Querystring: { segment?: string } }>(
    '/:object/resolve',
    hidden,
    async (request) => {
      const conn = await held(request.params.object);
      const resource = await conn.resolveResource(String(request.query.segment ?? ''));
      return resource ? { resource } : {};
    },
  );
  app.post<{ Params: { object: string }; Querystring: { fingerprint?: string; wait?: string } }>(
    '/:object/first-probe',
    hidden,
    async (request) => {
      const wait = Math.min(Math.max(Number(request.query.wait) || 0, 0), 60_000);
      const conn = await held(request.params.object, request.query.fingerprint);
      await conn.firstProbe(wait);
      return conn.currentHealth;
    },
  );
  app.post<{ Params: { object: string } }>('/:object/probe', hidden, async (request) => {
    (await held(request.params.object)).probeOnDemand();
    return {};
  });

  // exec, attach, port-forward: the upgrade goes on this replica's connection, and the two sockets are spliced.
  app.claimUpgrades(HOP_PREFIX, async (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    try {
      admitHop(req);
      const { objectName, rest } = parseHopUrl(req.url ?? '');
      const conn = await held(objectName);
      const answer = await conn.upgrade({
        method: req.method ?? 'GET',
        path: rest.slice('k8s'.length),
        headers: { ...upstreamHeaders(req), connection: 'Upgrade', upgrade: String(req.headers.upgrade ?? '') },
        here: true,
      });
      const lines = [`HTTP/1.1 ${answer.statusCode} ${answer.statusMessage}`];
      for (const [name, value] of Object.entries(answer.headers))
        for (const one of Array.isArray(value) ? value : [value ?? '']) lines.push(`${name}: ${one}`);
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (answer.rest.length > 0) socket.write(answer.rest);
      if (head.length > 0) answer.socket.write(head);
      answer.socket.pipe(socket).on('error', () => answer.socket.destroy());
      socket.pipe(answer.socket).on('error', () => socket.destroy());
      answer.socket.on('close', () => socket.destroy());
      socket.on('close', () => answer.socket.destroy());
      answer.socket.resume();
      await new Promise((resolve) => socket.once('close', resolve));
    } catch (err) {
      const known = toHttpError(err);
      const status = known?.status ?? 502;
      const body = JSON.stringify({
        error: known?.message ?? (err as Error).message,
        reason: known?.reason ?? 'BadGateway',
      });
      socket.end(
        `HTTP/1.1 ${status} Hop\r\n${HOP_ANSWER}: ${hopAnswer(err)}\r\ncontent-type: application/json\r\n` +
          `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
    }
  });
}

/** The cluster's response headers as they are, minus hop-by-hop ones (the sender shapes them for its client). */
function responseHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || name === 'connection' || name === 'keep-alive' || name === 'transfer-encoding') continue;
    out[name] = value;
  }
  return out;
}
