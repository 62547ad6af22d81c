// One upgraded session through the proxy (exec, attach, port-forward over SPDY or WebSocket, or a
// WebSocket watch): authenticated by the API key in Authorization, admitted like any proxied
// request, one of the caller's long-running slots on the cluster, then the client's socket and the
// cluster's spliced both ways with no buffering beyond what each socket holds (pipe: a slow side
// slows the other, nothing piles up). One audit record when it ends (audit/session.ts): who,
// cluster, verb, resource, namespace, name, result, start, end and the bytes each way; never a
// byte of the stream. An exec or attach (kubectl exec, attach, debug) is also recorded when
// recording is on (src/recording/, docs/sessions.md): the WebSocket channel stream is read as it
// passes (recording/stream-tap.ts), never held up; a SPDY stream's recording holds only who,
// where and when (and `required` recording refuses SPDY, 400).
import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { AuditService } from '../audit/audit-service.js';
import { AuditSession } from '../audit/session.js';
import type { OpenStreams } from '../auth/open-streams.js';
import type { AuthService } from '../auth/auth-service.js';
import type { Principal } from '../auth/principal.js';
import type { UpgradeAnswer } from '../clusters/upgrade.js';
import {
  BadGatewayError,
  BadRequestError,
  ForbiddenError,
  HttpError,
  TooManyRequestsError,
  UnauthorizedError,
} from '../errors.js';
import type { SessionRecorder } from '../recording/recorder.js';
import type { Recordings } from '../recording/recordings.js';
import { ChannelStreamTap, tappable } from '../recording/stream-tap.js';
import { requestIdOf, type Logger } from '../log.js';
import { admitProxyRequest, type AdmittedRequest, type NamedRequest, type ProxyServices } from './admit.js';
import { clientResponseHeaders, upstreamRequestHeaders, type HeaderMap } from '../cluster-access/headers.js';
import { statusOf } from './status.js';

export interface SessionServices extends ProxyServices {
  auth: ProxyServices['auth'] & Pick<AuthService, 'authenticateApiKey'>;
  audit: Pick<AuditService, 'record'>;
  openStreams: Pick<OpenStreams, 'open'>;
  recordings: Pick<Recordings, 'open' | 'end' | 'discard' | 'enabled' | 'required'>;
}

/** Runs one upgrade request on the client's socket until either side ends it. */
export async function runUpgradeSession(
  services: SessionServices,
  log: Logger,
  req: IncomingMessage,
  client: Duplex,
  head: Buffer,
): Promise<void> {
  const requestId = requestIdOf(req.headers);
  const request = { id: requestId, ip: req.socket.remoteAddress ?? '', url: req.url ?? '/' };
  const session = new AuditSession(services.audit, log, undefined, request);
  client.on('error', () => undefined);
  let release: (() => void) | undefined;
  let forget: (() => void) | undefined;
  let admitted: AdmittedRequest | undefined;
  let recording: Recording | undefined;
  let status = 0;
  try {
    const principal = authenticate(services, req, (who) => session.identify(who, request));
    admitted = await admitProxyRequest(services, principal, req.method ?? 'GET', req.url ?? '/', req.headers, (named) =>
      describe(session, named),
    );
    release = admitted.conn.admit(`${principal.kind}:${principal.id}`, true);
    recording = await startRecording(services, principal, admitted, req, session);
    const answer = await admitted.conn.upgrade({
      method: req.method ?? 'GET',
      path: admitted.upstreamPath,
      headers: { ...upstreamRequestHeaders(req.headers, true), ...admitted.impersonation },
    });
    if (answer.statusCode === 401) {
      answer.socket.destroy();
      throw new BadGatewayError(
        `the cluster rejected kiteline's credentials for it (401): check the registered kubeconfig`,
      );
    }
    if (answer.statusCode === 101) session.name({ protocol: streamProtocol(answer.headers) });
    // In `required` mode a session whose recording cannot go on is cut (both sockets).
    const cut = services.recordings.required
      ? () => {
          client.destroy();
          answer.socket.destroy();
        }
      : undefined;
    const tap =
      recording && answer.statusCode === 101 ? tapFor(recording, session.entry.protocol ?? '', cut) : undefined;
    if (recording && cut) recording.recorder.onFailure(cut);
    // Revoked credentials cut both sockets (the spliced bytes have no frame kiteline could end cleanly).
    forget = services.openStreams.open(
      principal,
      () => {
        client.destroy();
        answer.socket.destroy();
      },
      { stillAllowed: admitted.stillAllowed },
    );
    status = answer.statusCode;
    await splice(client, head, answer, session, tap);
  } catch (err) {
    const known = err instanceof HttpError ? err : undefined;
    if (!known) log.error({ err, requestId }, 'upgrade failed');
    status = known?.status ?? 500;
    refuse(
      client,
      status,
      statusOf(known, requestId),
      known instanceof TooManyRequestsError ? known.retryAfterSeconds : undefined,
    );
  } finally {
    forget?.();
    release?.();
    // A stream that never opened (the cluster refused it) has nothing to keep.
    if (recording && status !== 101) {
      void services.recordings.discard(recording.recorder);
      session.name({ recording: undefined });
    } else if (recording)
      void services.recordings.end(recording.recorder, {
        result: 'success',
        ...(recording.exitCode !== undefined ? { exitCode: recording.exitCode } : {}),
      });
    // Only what names an action is audited: an anonymous refusal or a malformed path is not one.
    if (admitted || session.entry.who !== 'anonymous')
      session.end({ status, result: status === 101 ? 'success' : 'failure' });
    else session.drop();
  }
}

/** A recorded exec or attach: its recorder, and the exit code once the stream told it. */
interface Recording {
  recorder: SessionRecorder;
  exitCode?: number;
}

/**
 * Starts recording an exec or attach (kubectl exec, attach, debug), when recording is on: who,
 * cluster, pod, container and command (from the query, as kubectl sends them).
 */
async function startRecording(
  services: SessionServices,
  principal: Principal,
  admitted: AdmittedRequest,
  req: IncomingMessage,
  session: AuditSession,
): Promise<Recording | undefined> {
  const resource = admitted.access?.resource;
  if (!services.recordings.enabled || (resource !== 'pods/exec' && resource !== 'pods/attach')) return undefined;
  const webSocket = String(req.headers.upgrade ?? '').toLowerCase() === 'websocket';
  if (services.recordings.required && !webSocket)
    throw new BadRequestError(
      'session recording is required and a SPDY stream is not recorded: use kubectl 1.30 or newer ' +
        '(or unset KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false)',
    );
  const query = new URLSearchParams(admitted.upstreamPath.split('?')[1] ?? '');
  const recorder = await services.recordings.open({
    user: principal.name,
    userKind: principal.kind,
    cluster: admitted.conn.name,
    kind: resource === 'pods/exec' ? 'exec' : 'attach',
    namespace: admitted.access?.namespace ?? '',
    pod: admitted.access?.name ?? '',
    container: (query.get('container') ?? '').slice(0, 253),
    command: query.getAll('command').join(' ').slice(0, 4096),
    requestId: session.entry.requestId,
    clientAddress: session.entry.clientAddress ?? '',
    width: 0,
    height: 0,
  });
  if (!recorder) return undefined;
  session.name({ recording: recorder.name });
  return { recorder };
}

/** The tap of a recorded stream, when its protocol is one it reads; otherwise a note in the recording. */
function tapFor(recording: Recording, protocol: string, cut: (() => void) | undefined): ChannelStreamTap | undefined {
  const { recorder } = recording;
  recorder.protocol(protocol);
  if (!tappable(protocol)) {
    recorder.mark(`kiteline: the stream (${protocol || 'unknown protocol'}) is not decoded; only who, where and when`);
    cut?.();
    return undefined;
  }
  return new ChannelStreamTap(protocol, {
    inputBytes: (bytes) => recorder.inputBytes(bytes),
    outputBytes: (stream, bytes) => recorder.outputBytes(stream, bytes),
    resize: (cols, rows) => recorder.resize(cols, rows),
    exited: (code) => (recording.exitCode = code),
    unreadable: (why) => {
      recorder.mark(`kiteline: ${why}; the rest is not recorded`);
      cut?.();
    },
  });
}

/** The transport and subprotocol of an upgraded answer, e.g. `websocket v5.channel.k8s.io`. */
function streamProtocol(headers: UpgradeAnswer['headers']): string {
  const one = (name: string) => {
    const value = headers[name];
    return (Array.isArray(value) ? value[0] : value)?.slice(0, 64) ?? '';
  };
  const sub = one('sec-websocket-protocol') || one('x-stream-protocol-version');
  return [one('upgrade'), sub].filter(Boolean).join(' ');
}

/**
 * The caller, named to the audit session (`identify`) also when a token of another door is
 * refused: that refusal is audited as its holder's. An upgrade never reaches the router
 * (plugins/upgrades.ts), so the door is named here.
 */
function authenticate(services: SessionServices, req: IncomingMessage, identify: (who: Principal) => void): Principal {
  const header = req.headers.authorization;
  if (!header || header.trim() === '')
    throw new UnauthorizedError('send a kiteline API key as Authorization: Bearer <key>');
  const result = services.auth.authenticateApiKey(header, 'kubernetes');
  if ('principal' in result) {
    identify(result.principal);
    return result.principal;
  }
  if (!result.refused) throw new UnauthorizedError(result.failure);
  identify(result.refused);
  throw new ForbiddenError(result.failure);
}

function describe(session: AuditSession, admitted: NamedRequest): void {
  session.name({
    cluster: admitted.conn.name,
    verb: admitted.access?.verb ?? admitted.info.verb,
    resource: admitted.access?.resource ?? admitted.info.path,
    namespace: admitted.access?.namespace ?? '',
    name: admitted.access?.name ?? '',
  });
}

/**
 * Sends the cluster's head to the client and splices the two sockets until either ends. A
 * non-101 answer (an error Status) is passed through the same way and ends with the cluster's
 * connection (kiteline sends Connection: Upgrade, so the cluster closes after an error).
 */
function splice(
  client: Duplex,
  clientHead: Buffer,
  answer: UpgradeAnswer,
  session: AuditSession,
  tap: ChannelStreamTap | undefined,
): Promise<void> {
  const upstream = answer.socket;
  const upgraded = answer.statusCode === 101;
  client.write(responseHead(answer.statusCode, answer.statusMessage, clientResponseHeaders(answer.headers, upgraded)));
  if (answer.rest.length > 0) {
    session.countOut(answer.rest.length);
    tap?.cluster(answer.rest);
    client.write(answer.rest);
  }
  if (upgraded && clientHead.length > 0) {
    session.countIn(clientHead.length);
    tap?.client(clientHead);
    upstream.write(clientHead);
  }
  (client as Duplex & { setNoDelay?: (on: boolean) => void }).setNoDelay?.(true);
  (client as Duplex & { setTimeout?: (ms: number) => void }).setTimeout?.(0);
  return new Promise((resolve) => {
    upstream.on('data', (chunk: Buffer) => {
      session.countOut(chunk.length);
      tap?.cluster(chunk);
    });
    if (upgraded)
      client.on('data', (chunk: Buffer) => {
        session.countIn(chunk.length);
        tap?.client(chunk);
      });
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      client.destroy();
      upstream.destroy();
      resolve();
    };
    upstream.pipe(client);
    if (upgraded) client.pipe(upstream);
    for (const socket of [client, upstream]) {
      socket.once('close', end);
      socket.once('error', end);
    }
    upstream.once('end', () => client.end());
    upstream.resume();
  });
}

function responseHead(code: number, message: string, headers: HeaderMap): string {
  const lines = [`HTTP/1.1 ${code} ${message}`];
  for (const [name, value] of Object.entries(headers)) {
    for (const one of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${one}`);
  }
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** Answers the upgrade request with a Status and closes the connection. */
function refuse(client: Duplex, code: number, status: object, retryAfterSeconds: number | undefined): void {
  if (client.destroyed) return;
  const body = JSON.stringify(status);
  const headers: HeaderMap = {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(body)),
    connection: 'close',
  };
  if (retryAfterSeconds !== undefined) headers['retry-after'] = String(retryAfterSeconds);
  const head = responseHead(code, STATUS_CODES[code] ?? '', headers);
  client.end(head + body);
}
