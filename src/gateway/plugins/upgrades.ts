// HTTP/1.1 Upgrade requests, in one place. Node hands an upgrade to the server's 'upgrade'
// listeners and never to a route; this plugin owns the one listener:
//   - a path prefix claimed with app.claimUpgrades (the kubectl proxy's SPDY and WebSocket
//     sessions) goes to its handler with the raw socket;
//   - every other upgrade is served as the plain request it also is, through Fastify's routing,
//     hooks and all (authentication included), with the socket kept aside: a WebSocket route
//     calls acceptWebSocket to finish the handshake with `ws`; any other route answers it as
//     HTTP on a connection that closes afterwards (curl's `Upgrade: h2c`, say).
// A WebSocket authenticated by the session cookie must come from kiteline's own origin (a page
// elsewhere must not open a terminal with the user's cookie): same-origin.ts refuses any other as
// soon as the request is authenticated, and the handshake checks again.
import { ServerResponse, type IncomingMessage, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { WebSocketServer, type WebSocket } from 'ws';
import type { StreamOptions } from '../../auth/open-streams.js';
import { BadRequestError } from '../../errors.js';
import { stripBasePath } from '../base-path.js';
import { requireOwnOrigin } from './same-origin.js';

export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer) => Promise<void>;

declare module 'fastify' {
  interface FastifyInstance {
    /** Hands every upgrade under `prefix` to `handler`, before routing (the raw socket is its own). */
    claimUpgrades(prefix: string, handler: UpgradeHandler): void;
  }
}

/** The head bytes of upgrade requests being served through routing, until a route accepts them. */
const pendingHeads = new WeakMap<IncomingMessage, Buffer>();
/** A WebSocket client that answers no ping for this long is gone: it is terminated (its 'close' follows). */
const HEARTBEAT_MS = 30_000;
/** Frames above this close the WebSocket (1009): every protocol here sends small JSON messages. */
const MAX_MESSAGE_BYTES = 1024 * 1024;
const webSockets = new WebSocketServer({
  noServer: true,
  maxPayload: MAX_MESSAGE_BYTES,
  perMessageDeflate: false,
  clientTracking: false,
});
/** The open WebSockets of each gateway (several run in one test process), ended when it closes. */
const openWebSockets = new WeakMap<Server, Set<WebSocket>>();

/** Whether the request asks for a WebSocket (and came through the upgrade listener). */
export function isWebSocketRequest(request: FastifyRequest): boolean {
  return pendingHeads.has(request.raw) && String(request.headers.upgrade ?? '').toLowerCase() === 'websocket';
}

/**
 * Completes the WebSocket handshake of an authenticated route: the reply is hijacked, the
 * socket is the WebSocket's from here on. A plain HTTP request gets 400; a cookie-authenticated
 * one from another origin 403.
 */
export function acceptWebSocket(
  request: FastifyRequest,
  reply: FastifyReply,
  revocation: StreamOptions = {},
): Promise<WebSocket> {
  const head = pendingHeads.get(request.raw);
  if (!head || !isWebSocketRequest(request))
    throw new BadRequestError('this route speaks WebSocket: send an Upgrade: websocket request');
  if (request.principal?.kind === 'user' && request.headers.authorization === undefined) requireOwnOrigin(request);
  pendingHeads.delete(request.raw);
  reply.hijack();
  // A WebSocket lives as long as its protocol says (pings keep it honest), not the idle timeout.
  request.raw.socket.setTimeout(0);
  return new Promise((resolve) => {
    webSockets.handleUpgrade(request.raw, request.raw.socket, head, (ws) => {
      const open = openWebSockets.get(request.server.server);
      open?.add(ws);
      const stopHeartbeat = keepAlive(ws);
      const forget = request.principal
        ? request.server.services.openStreams.open(
            request.principal,
            (message) => closeRevoked(ws, message),
            revocation,
          )
        : undefined;
      ws.once('close', () => {
        open?.delete(ws);
        stopHeartbeat();
        forget?.();
      });
      resolve(ws);
    });
  });
}

/** A WebSocket of revoked credentials closes with 1008 (policy violation) and why, after an `error` message. */
const REVOKED_CODE = 1008;
/** A client that does not answer the close within this is cut off. */
const REVOKED_CLOSE_GRACE_MS = 2000;

function closeRevoked(ws: WebSocket, message: string): void {
  if (ws.readyState !== ws.OPEN) return;
  // Both WebSocket protocols here (terminal, logs) show an `error` message to the user.
  ws.send(JSON.stringify({ type: 'error', data: message }));
  let reason = message;
  while (Buffer.byteLength(reason) > 123) reason = reason.slice(0, -1); // a close reason's limit
  ws.close(REVOKED_CODE, reason);
  setTimeout(() => ws.terminate(), REVOKED_CLOSE_GRACE_MS).unref();
}

/** Pings the client every HEARTBEAT_MS; one that did not answer the last ping is terminated. */
function keepAlive(ws: WebSocket): () => void {
  let alive = true;
  ws.on('pong', () => (alive = true));
  const timer = setInterval(() => {
    if (!alive) return ws.terminate();
    alive = false;
    ws.ping();
  }, HEARTBEAT_MS);
  timer.unref();
  return () => clearInterval(timer);
}

export default fp(
  async function upgrades(app: FastifyInstance) {
    const claims: Array<{ prefix: string; handler: UpgradeHandler }> = [];
    const sessions = new Set<Duplex>();
    app.decorate('claimUpgrades', (prefix: string, handler: UpgradeHandler) => {
      claims.push({ prefix, handler });
    });

    /** The sockets of claimed upgrades (kubectl's exec, attach, port-forward): spliced byte streams. */
    const claimed = new Set<Duplex>();
    const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      sessions.add(socket);
      socket.once('close', () => sessions.delete(socket));
      const url = stripBasePath(req, app.services.config.basePath);
      const claim = claims.find(({ prefix }) => url.startsWith(prefix));
      if (claim) {
        claimed.add(socket);
        void claim.handler(req, socket, head).finally(() => {
          sessions.delete(socket);
          claimed.delete(socket);
        });
        return;
      }
      pendingHeads.set(req, head);
      serveAsRequest(app.server, req, socket as Socket);
    };
    app.server.on('upgrade', onUpgrade);
    const open = new Set<WebSocket>();
    openWebSockets.set(app.server, open);
    // Before the server closes: it waits for its connections, and a log stream or a terminal
    // never ends by itself. Clients see 1001 (going away) and reconnect to another replica.
    app.addHook('preClose', async () => {
      app.server.removeListener('upgrade', onUpgrade);
      for (const ws of open) ws.close(1001, 'kiteline is shutting down');
      for (const socket of claimed) socket.destroy();
    });
    app.addHook('onClose', async () => {
      for (const ws of open) ws.terminate();
      for (const socket of sessions) socket.destroy();
    });
  },
  { name: 'kiteline-upgrades' },
);

/**
 * Routes an upgrade request as a plain HTTP/1.1 request, as Node would without an upgrade
 * listener; if no route accepts the WebSocket, the answer goes out on a connection that closes
 * afterwards.
 */
function serveAsRequest(server: Server, req: IncomingMessage, socket: Socket): void {
  const res = new ServerResponse(req);
  res.shouldKeepAlive = false;
  res.assignSocket(socket);
  res.once('finish', () => socket.end());
  server.emit('request', req, res);
}
