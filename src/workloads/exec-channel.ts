// One exec in a container over the cluster's own exec WebSocket (`v4.channel.k8s.io`), the
// building block of terminals and the pod file browser. The handshake goes through
// `conn.upgrade` (clusters/upgrade.ts: the connection's TLS material, credentials and the caller's
// impersonation headers, on a socket of its own); after the 101 the socket carries WebSocket
// frames, read and written with the frame codec of the `ws` library (its exported Receiver and
// Sender: the handshake is already done, only framing is left). The command is an argv, one
// `command=` query parameter per word: nothing goes through a shell.
//
// The v4 channel protocol: every binary message starts with its channel byte; 0 stdin (to the
// cluster), 1 stdout, 2 stderr, 3 the final Status (JSON), 4 terminal size (JSON {Width, Height},
// to the cluster). A v4 stream cannot half-close stdin: the end of input is the end of the
// WebSocket (see pod-files.ts for what that means for uploads).
import { createHash, randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import WebSocket from 'ws';
import type { ClusterConnection } from '../clusters/types.js';
import type { HttpError } from '../errors.js';
import { BadGatewayError, BadRequestError, ForbiddenError, NotFoundError } from '../errors.js';
import type { UpstreamHeaders } from '../cluster-access/impersonation.js';

const PROTOCOL = 'v4.channel.k8s.io';
const WEBSOCKET_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
const STDIN = 0;
const STDOUT = 1;
const STDERR = 2;
const ERROR = 3;
const RESIZE = 4;
/** The cluster's frames above this end the exec: its stdout chunks are far smaller. */
const MAX_FRAME_BYTES = 16 * 1024 * 1024;
/** An error answer (not 101) is read up to this much for its message. */
const MAX_REFUSAL_BYTES = 64 * 1024;
/** Upstream output waiting to be written beyond this pauses the writer (see writeStdin). */
const HIGH_WATER_BYTES = 256 * 1024;

/** What to run, and where. */
export interface ExecTarget {
  namespace: string;
  pod: string;
  /** Empty or undefined: the pod's only (or default) container. */
  container?: string;
  command: string[];
  stdin: boolean;
  tty: boolean;
}

/** How an exec ended. exitCode is undefined when the command did not run to an exit (error set). */
export interface ExecResult {
  exitCode: number | undefined;
  /** The cluster's message for a failure other than a non-zero exit (command not found, ...). */
  error: string | undefined;
}

/** The part of `ws`'s frame codec used here (ws exports it; @types/ws does not describe it). */
interface FrameReceiver extends EventEmitter {
  write(chunk: Buffer): boolean;
}
interface FrameSender {
  send(
    data: Buffer,
    options: { binary: boolean; fin: boolean; mask: boolean; compress: boolean },
    cb?: (err?: Error) => void,
  ): void;
  close(code: number, data: string, mask: boolean, cb?: (err?: Error) => void): void;
  pong(data: Buffer, mask: boolean, cb?: (err?: Error) => void): void;
}
const codec = WebSocket as unknown as {
  Receiver: new (options: { isServer: boolean; maxPayload: number; binaryType: 'nodebuffer' }) => FrameReceiver;
  Sender: new (socket: Socket) => FrameSender;
};

/** A Kubernetes Status as channel 3 carries it. */
interface ExecStatus {
  status?: string;
  message?: string;
  reason?: string;
  details?: { causes?: Array<{ reason?: string; message?: string }> };
}

/**
 * A running exec, opened paused: nothing of the cluster's output is read until start(), so the
 * owner can attach its listeners first (and finish its own handshake with a client meanwhile).
 * Events: 'stdout' (Buffer), 'stderr' (Buffer), 'end' (ExecResult, once, after the last output).
 * bytesIn counts stdin sent, bytesOut stdout and stderr received.
 */
export class ExecChannel extends EventEmitter {
  bytesIn = 0;
  bytesOut = 0;
  private readonly sender: FrameSender;
  private readonly receiver: FrameReceiver;
  private status: ExecStatus | undefined;
  private result: ExecResult | undefined;
  private started = false;

  constructor(
    private readonly socket: Socket,
    private readonly rest: Buffer,
  ) {
    super();
    this.sender = new codec.Sender(socket);
    this.receiver = new codec.Receiver({ isServer: false, maxPayload: MAX_FRAME_BYTES, binaryType: 'nodebuffer' });
    this.receiver.on('message', (data: Buffer, isBinary: boolean) => this.onMessage(data, isBinary));
    this.receiver.on('ping', (data: Buffer) => this.sender.pong(data, true));
    this.receiver.on('conclude', () => this.finish());
    this.receiver.on('error', () => this.finish('the cluster sent a malformed WebSocket frame'));
    socket.on('close', () => this.finish());
    socket.on('error', () => undefined);
    socket.setTimeout(0);
  }

  /** Starts reading the cluster's output; an exec that ended before reports its 'end' now (asynchronously). */
  start(): void {
    if (this.started) return;
    this.started = true;
    if (this.result) {
      const result = this.result;
      queueMicrotask(() => this.emit('end', result));
      return;
    }
    this.socket.on('data', (chunk: Buffer) => this.receiver.write(chunk));
    if (this.rest.length > 0) this.receiver.write(this.rest);
    this.socket.resume();
  }

  /** Sends stdin bytes; false when the socket's buffer is full (wait for 'drain' on it: onDrain). */
  writeStdin(data: Buffer): boolean {
    if (this.isEnded) return false;
    this.bytesIn += data.length;
    this.sender.send(Buffer.concat([Buffer.of(STDIN), data]), { binary: true, fin: true, mask: true, compress: false });
    return this.socket.writableLength < HIGH_WATER_BYTES;
  }

  /** Calls back once the stdin written so far has left (or at once when nothing waits). */
  onDrain(callback: () => void): void {
    if (this.isEnded || this.socket.writableLength < HIGH_WATER_BYTES) return callback();
    this.socket.once('drain', callback);
    this.once('end', callback);
  }

  /** Tells the cluster the terminal's size (TTY execs). */
  resize(cols: number, rows: number): void {
    if (this.isEnded) return;
    const size = Buffer.from(JSON.stringify({ Width: cols, Height: rows }));
    this.sender.send(Buffer.concat([Buffer.of(RESIZE), size]), {
      binary: true,
      fin: true,
      mask: true,
      compress: false,
    });
  }

  /** Stops reading the cluster's output (backpressure) until resume(). */
  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    if (this.started && !this.isEnded) this.socket.resume();
  }

  /**
   * Ends the exec from this side: a close frame, then the socket. On a v4 stream without a TTY
   * this is also the end of stdin: the command sees EOF (and its output after that is lost). With
   * a TTY the container runtime keeps the terminal open and the command runs on (terminal.ts
   * types ^C and ^D first).
   */
  close(): void {
    if (this.isEnded || this.socket.destroyed) return;
    this.sender.close(1000, '', true, () => this.socket.end());
    // A cluster that never answers the close frame still loses the socket.
    setTimeout(() => this.socket.destroy(), 5000).unref();
  }

  /** Drops the connection at once (the client left). */
  destroy(): void {
    this.socket.destroy();
  }

  get isEnded(): boolean {
    return this.result !== undefined;
  }

  private onMessage(data: Buffer, isBinary: boolean): void {
    if (!isBinary || data.length === 0) return;
    const channel = data[0];
    const payload = data.subarray(1);
    if (payload.length === 0) return; // each channel's first, empty message says it is open
    if (channel === STDOUT || channel === STDERR) {
      this.bytesOut += payload.length;
      this.emit(channel === STDOUT ? 'stdout' : 'stderr', payload);
    } else if (channel === ERROR) {
      try {
        this.status = JSON.parse(payload.toString('utf8')) as ExecStatus;
      } catch {
        this.status = { status: 'Failure', message: 'the cluster sent an unreadable exec status' };
      }
    }
  }

  private finish(connectionError?: string): void {
    if (this.result) return;
    this.result = resultOf(this.status, connectionError);
    this.socket.destroy();
    if (this.started) this.emit('end', this.result);
  }
}

/** The exit code or error a final Status describes; no Status at all: the connection was lost. */
function resultOf(status: ExecStatus | undefined, connectionError: string | undefined): ExecResult {
  if (!status)
    return {
      exitCode: undefined,
      error: connectionError ?? 'the exec ended without an exit status (connection closed)',
    };
  if (status.status === 'Success') return { exitCode: 0, error: undefined };
  if (status.reason === 'NonZeroExitCode') {
    const code = Number(status.details?.causes?.find((c) => c.reason === 'ExitCode')?.message);
    if (Number.isInteger(code)) return { exitCode: code, error: undefined };
  }
  return { exitCode: undefined, error: status.message || 'the exec failed' };
}

/** The exec's path and query on the API server: one `command=` per argv word. */
export function execPath(target: ExecTarget): string {
  const query = new URLSearchParams();
  if (target.container) query.set('container', target.container);
  for (const word of target.command) query.append('command', word);
  query.set('stdin', String(target.stdin));
  query.set('stdout', 'true');
  // With a TTY the cluster merges stderr into stdout (and refuses stderr=true).
  query.set('stderr', String(!target.tty));
  query.set('tty', String(target.tty));
  const pod = `${encodeURIComponent(target.namespace)}/pods/${encodeURIComponent(target.pod)}`;
  return `/api/v1/namespaces/${pod}/exec?${query.toString()}`;
}

/**
 * Opens the exec: the WebSocket handshake through conn.upgrade, checked (101, the protocol, the
 * accept key). A refusal becomes the error its status deserves: the cluster's message with 400
 * (no such container, pod not running), 403 (the cluster's RBAC under impersonation), 404 (no
 * such pod); anything else is a 502.
 */
export async function openExec(
  conn: ClusterConnection,
  target: ExecTarget,
  impersonation: UpstreamHeaders,
): Promise<ExecChannel> {
  const key = randomBytes(16).toString('base64');
  const answer = await conn.upgrade({
    method: 'GET',
    path: execPath(target),
    headers: {
      connection: 'Upgrade',
      upgrade: 'websocket',
      'sec-websocket-version': '13',
      'sec-websocket-key': key,
      'sec-websocket-protocol': PROTOCOL,
      ...impersonation,
    },
  });
  if (answer.statusCode !== 101) {
    const message = await refusalMessage(answer.socket, answer.rest);
    throw refusalError(conn.name, answer.statusCode, message);
  }
  const accept = createHash('sha1')
    .update(key + WEBSOCKET_GUID)
    .digest('base64');
  if (answer.headers['sec-websocket-accept'] !== accept || answer.headers['sec-websocket-protocol'] !== PROTOCOL) {
    answer.socket.destroy();
    throw new BadGatewayError(`cluster "${conn.name}" answered the exec WebSocket handshake without ${PROTOCOL}`);
  }
  return new ExecChannel(answer.socket, answer.rest);
}

/** The message of a refused upgrade (a Status, usually), read from what follows the head. */
function refusalMessage(socket: Socket, rest: Buffer): Promise<string> {
  return new Promise((resolve) => {
    let body = rest;
    const done = () => {
      socket.destroy();
      const text = body.toString('utf8');
      try {
        const status = JSON.parse(text) as ExecStatus;
        resolve(status.message ?? text);
      } catch {
        resolve(text.trim().slice(0, 1000));
      }
    };
    socket.on('data', (chunk: Buffer) => {
      body = Buffer.concat([body, chunk]);
      if (body.length > MAX_REFUSAL_BYTES) done();
    });
    socket.once('end', done);
    socket.once('error', done);
    socket.setTimeout(10_000, done);
    socket.resume();
  });
}

function refusalError(cluster: string, status: number, message: string): HttpError {
  const what = message || `status ${status}`;
  switch (status) {
    case 400:
      return new BadRequestError(what);
    case 403:
      return new ForbiddenError(`cluster ${cluster} refused the exec: ${what}`);
    case 404:
      return new NotFoundError(what);
    case 401:
      return new BadGatewayError(
        `the cluster rejected kiteline's credentials for it (401): check the registered kubeconfig`,
      );
    default:
      return new BadGatewayError(`cluster "${cluster}" refused the exec (${status}): ${what}`);
  }
}

/** How an exec ends, once it has. */
export function endOf(exec: ExecChannel): Promise<ExecResult> {
  return new Promise((resolve) => exec.once('end', resolve));
}

/** A command run to its end without stdin or a TTY: what it printed, bounded, and how it ended. */
export interface CommandRun {
  /** The first `maxBytes` of stdout. */
  stdout: Buffer;
  /** The last 4 KiB of stderr. */
  stderr: string;
  /** stdout went beyond `maxBytes`: the command was stopped there. */
  cut: boolean;
  /** It ran longer than `timeoutMs` and was stopped. */
  timedOut: boolean;
  result: ExecResult;
}

/**
 * Runs a command in a container to its end (no stdin, no TTY) and keeps at most `maxBytes` of its
 * stdout: beyond that, or after `timeoutMs`, or when `signal` aborts, the exec is closed.
 */
export async function runCommand(
  conn: ClusterConnection,
  target: Omit<ExecTarget, 'stdin' | 'tty'>,
  impersonation: UpstreamHeaders,
  options: { maxBytes: number; timeoutMs?: number; signal: AbortSignal },
): Promise<CommandRun> {
  const exec = await openExec(conn, { ...target, stdin: false, tty: false }, impersonation);
  const chunks: Buffer[] = [];
  let size = 0;
  let stderr = '';
  let cut = false;
  let timedOut = false;
  exec.on('stdout', (chunk: Buffer) => {
    if (cut) return;
    const room = options.maxBytes - size;
    if (chunk.length > room) {
      if (room > 0) chunks.push(chunk.subarray(0, room));
      cut = true;
      exec.destroy();
    } else chunks.push(chunk);
    size += chunk.length;
  });
  exec.on('stderr', (chunk: Buffer) => (stderr = (stderr + chunk.toString('utf8')).slice(-4096)));
  const ended = endOf(exec);
  const stop = () => exec.destroy();
  options.signal.addEventListener('abort', stop, { once: true });
  const timer =
    options.timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          timedOut = true;
          exec.destroy();
        }, options.timeoutMs);
  if (options.signal.aborted) exec.destroy();
  exec.start();
  try {
    const result = await ended;
    return { stdout: Buffer.concat(chunks), stderr, cut, timedOut, result };
  } finally {
    clearTimeout(timer);
    options.signal.removeEventListener('abort', stop);
  }
}
