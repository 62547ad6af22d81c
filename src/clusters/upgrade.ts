// HTTP/1.1 Upgrade requests to a cluster (exec, attach and port-forward over SPDY/3.1 or
// WebSocket, a WebSocket watch): a socket of their own, opened with the connection's TLS material
// and credentials, the request head written by hand, and the answer's head read back. After a 101
// the socket carries the upgraded protocol; the caller splices it to the client's socket. The
// keep-alive pools cannot serve these: a 101 hands the connection over for good.
import type { IncomingHttpHeaders } from 'node:http';
import { connect as connectPlain, isIP, type LookupFunction, type Socket } from 'node:net';
import { connect as connectTls, type SecureContext } from 'node:tls';
import { BadGatewayError, BadRequestError } from '../errors.js';

export interface UpgradeRequest {
  method: string;
  /** Path and query on the cluster's API server. */
  path: string;
  /** The request's headers, Connection and Upgrade included (credentials are added here). */
  headers: Record<string, string | string[]>;
  /** Only on this connection, also once it is retired (the hop: its sender sends the request on). */
  here?: boolean;
}

/** The cluster's answer: its head, and the socket positioned after it. */
export interface UpgradeAnswer {
  statusCode: number;
  statusMessage: string;
  headers: IncomingHttpHeaders;
  /** Paused; after a 101, the upgraded protocol's bytes. */
  socket: Socket;
  /** Bytes that arrived after the head, before the socket was paused. */
  rest: Buffer;
}

/** Where and how: what a WarmConnection knows about its cluster. */
export interface UpgradeEndpoint {
  clusterName: string;
  server: URL;
  basePath: string;
  tls: { secureContext: SecureContext; rejectUnauthorized: boolean; servername?: string } | undefined;
  /** The connection's guarded resolver: no link-local or metadata address (refused-addresses.ts). */
  lookup: LookupFunction;
  authorization: string | undefined;
  connectTimeoutMs: number;
}

/** The answer's head must arrive within this, and be at most MAX_HEAD_BYTES. */
const HEAD_TIMEOUT_MS = 30_000;
const MAX_HEAD_BYTES = 64 * 1024;
const HEAD_END = Buffer.from('\r\n\r\n');

export async function openUpgrade(endpoint: UpgradeEndpoint, req: UpgradeRequest): Promise<UpgradeAnswer> {
  const head = requestHead(endpoint, req);
  const socket = await connected(endpoint);
  socket.setNoDelay(true);
  socket.write(head);
  return readAnswerHead(endpoint.clusterName, socket);
}

function requestHead(endpoint: UpgradeEndpoint, req: UpgradeRequest): string {
  const lines = [`${req.method} ${endpoint.basePath}${req.path} HTTP/1.1`, `host: ${endpoint.server.host}`];
  for (const [name, value] of Object.entries(req.headers)) {
    if (name === 'authorization' || name === 'host') continue;
    for (const one of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${one}`);
  }
  if (lines.some((line) => /[\r\n]/.test(line))) throw new BadRequestError('header values may not contain line breaks');
  if (endpoint.authorization) lines.push(`authorization: ${endpoint.authorization}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

function connected(endpoint: UpgradeEndpoint): Promise<Socket> {
  const { server, tls, lookup } = endpoint;
  const host = server.hostname.replace(/^\[|\]$/g, '');
  const port = Number(server.port) || (server.protocol === 'https:' ? 443 : 80);
  return new Promise((resolve, reject) => {
    const socket = tls
      ? connectTls({
          host,
          port,
          lookup,
          ...tls,
          servername: tls.servername ?? (isIP(host) ? undefined : host),
          ALPNProtocols: ['http/1.1'],
        })
      : connectPlain({ host, port, lookup });
    const timer = setTimeout(
      () =>
        fail(
          new BadGatewayError(
            `cluster "${endpoint.clusterName}" did not accept a connection within ${endpoint.connectTimeoutMs} ms`,
          ),
        ),
      endpoint.connectTimeoutMs,
    );
    const fail = (err: Error) => {
      clearTimeout(timer);
      socket.destroy();
      // The socket's error code stays readable (the fleet's hop tells a refused connection by it).
      reject(
        err instanceof BadGatewayError
          ? Object.assign(err, { code: 'UND_ERR_CONNECT_TIMEOUT' })
          : Object.assign(new BadGatewayError(`cluster "${endpoint.clusterName}" is unreachable: ${err.message}`), {
              code: (err as NodeJS.ErrnoException).code,
            }),
      );
    };
    socket.once('error', fail);
    socket.once(tls ? 'secureConnect' : 'connect', () => {
      clearTimeout(timer);
      socket.removeListener('error', fail);
      resolve(socket);
    });
  });
}

function readAnswerHead(clusterName: string, socket: Socket): Promise<UpgradeAnswer> {
  return new Promise((resolve, reject) => {
    let received = Buffer.alloc(0);
    const done = (err?: Error) => {
      clearTimeout(timer);
      socket.removeListener('data', onData);
      socket.removeListener('error', onError);
      socket.removeListener('end', onEnd);
      if (err) {
        socket.destroy();
        reject(err);
      }
    };
    const timer = setTimeout(
      () =>
        done(
          new BadGatewayError(`cluster "${clusterName}" did not answer the upgrade within ${HEAD_TIMEOUT_MS / 1000} s`),
        ),
      HEAD_TIMEOUT_MS,
    );
    const onError = (err: Error) =>
      done(new BadGatewayError(`cluster "${clusterName}" failed during the upgrade: ${err.message}`));
    const onEnd = () =>
      done(new BadGatewayError(`cluster "${clusterName}" closed the connection before answering the upgrade`));
    const onData = (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const end = received.indexOf(HEAD_END);
      if (end < 0) {
        if (received.length > MAX_HEAD_BYTES)
          done(
            new BadGatewayError(
              `cluster "${clusterName}" answered the upgrade with a head over ${MAX_HEAD_BYTES} bytes`,
            ),
          );
        return;
      }
      socket.pause();
      const parsed = parseHead(received.subarray(0, end).toString('latin1'));
      if (!parsed)
        return done(
          new BadGatewayError(`cluster "${clusterName}" answered the upgrade with something that is not HTTP/1.1`),
        );
      done();
      resolve({ ...parsed, socket, rest: received.subarray(end + HEAD_END.length) });
    };
    socket.on('data', onData);
    socket.once('error', onError);
    socket.once('end', onEnd);
  });
}

function parseHead(text: string): Pick<UpgradeAnswer, 'statusCode' | 'statusMessage' | 'headers'> | undefined {
  const [statusLine = '', ...lines] = text.split('\r\n');
  const match = /^HTTP\/1\.[01] (\d{3})(?: (.*))?$/.exec(statusLine);
  if (!match) return undefined;
  const headers: Record<string, string | string[]> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon <= 0) return undefined;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    const existing = headers[name];
    headers[name] = existing === undefined ? value : [...(Array.isArray(existing) ? existing : [existing]), value];
  }
  return { statusCode: Number(match[1]), statusMessage: match[2] ?? '', headers: headers };
}
