// One terminal WebSocket (GET /api/v1/terminal/<ns>/<pod>/ws, and the node terminal's), speaking
// Kite's JSON messages, bridged to one exec with a TTY over the cluster's own exec WebSocket
// (exec-channel.ts).
//
// The client sends `{type:"stdin", data}` (keystrokes), `{type:"resize", cols, rows}` (the
// terminal's size, passed to the exec's resize channel) and `{type:"ping"}` (answered
// `{type:"pong", data:""}`). The server sends `connected` once the shell runs, `stdout` (the TTY
// merges stderr into it; `stderr` only for an exec without a TTY), `info` (progress, e.g. while a
// node terminal's pod starts), `error` (the exec failed), and `close` with the shell's exit code
// when it exits, after which the WebSocket closes (1000). When the client closes, or stops
// answering WebSocket pings, the shell is sent ^C and ^D and the exec is ended (clientLeft).
//
// Output goes out as the cluster sends it, decoded as UTF-8 without splitting a character across
// two messages; a client that reads slowly pauses the cluster's output (nothing piles up beyond
// about 1 MiB), and stdin waits while the exec's socket is full. Never a byte of the session is
// logged: the audit record (routes/terminal.ts) keeps only the byte counts; the session's recorder
// (a SessionTap, src/recording/) sees output, keystrokes and resizes, when recording is on.
import { StringDecoder } from 'node:string_decoder';
import WebSocket from 'ws';
import { BadGatewayError, BadRequestError } from '../errors.js';
import { getJson, type ToolContext } from '../cluster-access/calls.js';
import type { ExecChannel, ExecResult } from './exec-channel.js';
import type { PodObject } from '../cluster-access/watch-events.js';

/** A shell the client may ask for: a plain command name (bash, sh, zsh, ash...), never a path or arguments. */
export const SHELL_NAME_PATTERN = '^[a-z][a-z0-9_-]{0,31}$';
const SHELL_NAME = new RegExp(SHELL_NAME_PATTERN);
/**
 * Without a `shell`: bash when the container has it, else sh (Kite's choice), decided before either
 * runs, so the session's exit code is the shell's own (Kite's `bash || sh` started sh after any
 * bash session that ended with a non-zero status).
 */
export const BASH_OR_SH = 'if command -v bash >/dev/null 2>&1; then exec bash; fi; exec sh';
/** kubectl's choice of a pod's container when none is named. */
const DEFAULT_CONTAINER_ANNOTATION = 'kubectl.kubernetes.io/default-container';
/** Above this much unsent output the exec's output is paused until the client took it. */
const HIGH_WATER_BYTES = 1024 * 1024;
/** What the shell is sent when the client leaves, one key at a time: ^C, then ^D (EOT). */
const LEAVING_KEYS = ['\x03', '\x04'];
/** Time for the shell to take one key (a ^C'd program to end, the prompt to come back) before the next. */
const LEAVING_KEY_PAUSE_MS = 300;
/** Kite's terminal sizes are uint16. */
const MAX_TERMINAL_SIDE = 65535;

export type TerminalMessageType = 'connected' | 'stdout' | 'stderr' | 'info' | 'error' | 'close' | 'pong';

/** Kite's server message; `close` also carries the shell's exit code. */
export interface TerminalMessage {
  type: TerminalMessageType;
  data: string;
  exitCode?: number;
}

/** A client message, checked. */
type ClientMessage =
  | { type: 'stdin'; data: string }
  | { type: 'resize'; cols: number; rows: number }
  | { type: 'ping' }
  | { type: 'invalid'; why: string };

/** What a session's recorder takes (recording/recorder.ts; structural, so workloads/ need not import it). */
export interface SessionTap {
  output(text: string): void;
  input(text: string): void;
  resize(cols: number, rows: number): void;
}

/** How a session ended, for its audit record. */
export interface TerminalOutcome {
  /** The shell's exit code when it exited; undefined when the client left first or the exec failed. */
  exitCode: number | undefined;
  /** Why the exec or the session failed (the cluster's message); undefined otherwise. */
  error: string | undefined;
  /** Stdin bytes sent to the cluster, and output bytes received from it. */
  bytesIn: number;
  bytesOut: number;
}

/** A shell asked for by name, checked: a plain command name (400 otherwise). */
export function checkedShell(shell: string): string {
  if (!SHELL_NAME.test(shell))
    throw new BadRequestError('shell must be a plain command name such as bash, sh, zsh or ash');
  return shell;
}

/** The exec command of a terminal: the named shell, or bash-else-sh. Throws 400 for anything but a plain name. */
export function terminalCommand(shell: string | undefined): string[] {
  if (shell === undefined || shell === '') return ['sh', '-c', BASH_OR_SH];
  return [checkedShell(shell)];
}

function parseClientMessage(text: string): ClientMessage {
  let message: { type?: unknown; data?: unknown; cols?: unknown; rows?: unknown };
  try {
    message = JSON.parse(text) as typeof message;
  } catch {
    return { type: 'invalid', why: 'a message must be JSON: {"type":"stdin"|"resize"|"ping", ...}' };
  }
  switch (message?.type) {
    case 'stdin':
      return typeof message.data === 'string'
        ? { type: 'stdin', data: message.data }
        : { type: 'invalid', why: 'stdin needs data, a string' };
    case 'resize': {
      const side = (value: unknown) =>
        Number.isInteger(value) && (value as number) > 0 && (value as number) <= MAX_TERMINAL_SIDE;
      if (!side(message.cols) || !side(message.rows))
        return { type: 'invalid', why: `resize needs cols and rows, integers from 1 to ${MAX_TERMINAL_SIDE}` };
      return { type: 'resize', cols: message.cols as number, rows: message.rows as number };
    }
    case 'ping':
      return { type: 'ping' };
    default:
      return { type: 'invalid', why: 'unknown message type: the client sends stdin, resize or ping' };
  }
}

/**
 * The client's side of a terminal, from the WebSocket handshake on. The exec may come later
 * (attach): a node terminal first waits for its pod, with `info` messages meanwhile. `done`
 * resolves once, when the session is over: the shell exited, the exec failed, or the client left
 * (and then the exec has ended too).
 */
export class TerminalSession {
  readonly done: Promise<TerminalOutcome>;
  private resolveDone!: (outcome: TerminalOutcome) => void;
  private readonly clientGone = new AbortController();
  private exec: ExecChannel | undefined;
  private size: { cols: number; rows: number } | undefined;
  private outputPaused = false;
  private over = false;

  constructor(
    private readonly ws: WebSocket,
    /** The session's recorder, when it is recorded: it sees the output, the keystrokes and the resizes. */
    private readonly tap?: SessionTap,
  ) {
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
    // A Buffer: binaryType is ws's default, 'nodebuffer'.
    ws.on('message', (data) => this.onClientMessage((data as Buffer).toString()));
    // A client that stops answering pings is terminated by acceptWebSocket's heartbeat: 'close'.
    ws.once('close', () => this.clientLeft());
    ws.on('error', () => this.clientLeft());
  }

  /** Aborted when the client closed the WebSocket or stopped answering pings. */
  get clientSignal(): AbortSignal {
    return this.clientGone.signal;
  }

  /** Progress for the user (Kite's UI prints it in blue). */
  info(text: string): void {
    this.send({ type: 'info', data: text });
  }

  /** Ends a session whose exec never started: an `error` message, then the WebSocket closes (1011). */
  fail(message: string): void {
    if (this.over) return;
    this.send({ type: 'error', data: message });
    this.end({ exitCode: undefined, error: message, bytesIn: 0, bytesOut: 0 }, 1011, 'the terminal failed');
  }

  /** Connects the opened exec (paused: exec-channel.ts) to the client: `connected`, then the bytes both ways. */
  attach(exec: ExecChannel): void {
    if (this.over || this.clientGone.signal.aborted) {
      exec.close();
      return;
    }
    this.exec = exec;
    const decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
    exec.on('stdout', (chunk: Buffer) => this.relay('stdout', decoders.stdout.write(chunk)));
    exec.on('stderr', (chunk: Buffer) => this.relay('stderr', decoders.stderr.write(chunk)));
    exec.once('end', (result: ExecResult) => {
      this.relay('stdout', decoders.stdout.end());
      this.relay('stderr', decoders.stderr.end());
      this.execEnded(exec, result);
    });
    this.send({ type: 'connected', data: 'Terminal connected successfully' });
    if (this.size) exec.resize(this.size.cols, this.size.rows);
    exec.start();
  }

  private onClientMessage(text: string): void {
    const message = parseClientMessage(text);
    switch (message.type) {
      case 'stdin':
        // Keystrokes before the shell runs (a node terminal's pod still starting) have no reader.
        if (this.exec && message.data !== '') this.tap?.input(message.data);
        if (this.exec && message.data !== '' && !this.exec.writeStdin(Buffer.from(message.data, 'utf8'))) {
          this.ws.pause();
          this.exec.onDrain(() => this.ws.resume());
        }
        return;
      case 'resize':
        this.size = { cols: message.cols, rows: message.rows };
        this.tap?.resize(message.cols, message.rows);
        this.exec?.resize(message.cols, message.rows);
        return;
      case 'ping':
        this.send({ type: 'pong', data: '' });
        return;
      case 'invalid':
        this.send({ type: 'error', data: message.why });
    }
  }

  /** Sends output; pauses the exec while the client has much unread, resumes once it took it. */
  private relay(type: 'stdout' | 'stderr', data: string): void {
    if (data === '') return;
    this.tap?.output(data);
    this.send({ type, data }, () => {
      if (this.outputPaused && this.ws.bufferedAmount < HIGH_WATER_BYTES) {
        this.outputPaused = false;
        this.exec?.resume();
      }
    });
    if (!this.outputPaused && this.ws.bufferedAmount >= HIGH_WATER_BYTES) {
      this.outputPaused = true;
      this.exec?.pause();
    }
  }

  private send(message: TerminalMessage, sent?: () => void): void {
    if (this.ws.readyState !== WebSocket.OPEN) return;
    this.ws.send(JSON.stringify(message), sent);
  }

  /**
   * The shell exited (`close`, then 1000) or the exec failed (`error`, then 1011); after the client left: only the
   * outcome.
   */
  private execEnded(exec: ExecChannel, result: ExecResult): void {
    const outcome: TerminalOutcome = {
      exitCode: result.exitCode,
      error: result.error,
      bytesIn: exec.bytesIn,
      bytesOut: exec.bytesOut,
    };
    if (this.clientGone.signal.aborted) return this.end({ ...outcome, exitCode: undefined, error: undefined });
    if (result.exitCode !== undefined) {
      this.send({ type: 'close', data: `the shell exited with code ${result.exitCode}`, exitCode: result.exitCode });
      return this.end(outcome, 1000, 'the shell exited');
    }
    this.send({ type: 'error', data: `the terminal ended: ${result.error}` });
    this.end(outcome, 1011, 'the exec failed');
  }

  /** Ends the session from the gateway's side (it shuts down): an `info`, a 1001 close, then as if the client left. */
  shutdown(reason: string): Promise<TerminalOutcome> {
    this.info(reason);
    if (this.ws.readyState === WebSocket.OPEN) this.ws.close(1001, 'the gateway is shutting down');
    this.clientLeft();
    return this.done;
  }

  /**
   * The client closed or vanished: the exec is ended, and the session is over once it has. Closing
   * the exec's stream does not end the shell (the container runtime keeps its TTY open), so the
   * shell is first sent what a user would type to leave: ^C (ends a foreground program), then,
   * once the shell is back at its prompt, ^D (ends it there; Kite sends ^D alone). A program that
   * ignores both outlives the session (docs/workloads.md).
   */
  private clientLeft(): void {
    if (this.clientGone.signal.aborted) return;
    this.clientGone.abort();
    const exec = this.exec;
    if (!exec) return this.end({ exitCode: undefined, error: undefined, bytesIn: 0, bytesOut: 0 });
    const keys = [...LEAVING_KEYS];
    const typeNext = () => {
      const key = keys.shift();
      // The exec's 'end' (within its close timeout) finishes the session.
      if (key === undefined || exec.isEnded) return exec.close();
      exec.writeStdin(Buffer.from(key));
      setTimeout(typeNext, LEAVING_KEY_PAUSE_MS);
    };
    typeNext();
  }

  private end(outcome: TerminalOutcome, code?: number, reason?: string): void {
    if (this.over) return;
    this.over = true;
    if (code !== undefined && this.ws.readyState === WebSocket.OPEN) this.ws.close(code, reason);
    this.resolveDone(outcome);
  }
}

/**
 * The container a terminal opens in: the one asked for, else the pod's default as kubectl picks
 * it (the `kubectl.kubernetes.io/default-container` annotation, else the first container). Read
 * with the caller's headers: a missing pod is the cluster's 404, before the WebSocket opens.
 */
export async function terminalContainer(
  ctx: ToolContext,
  namespace: string,
  pod: string,
  asked: string | undefined,
): Promise<string> {
  if (asked) return asked;
  const object = await getJson<PodObject>(
    ctx,
    `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(pod)}`,
  );
  const containers = (object.spec?.containers ?? []).map((c) => c.name);
  const annotations = (object.metadata.annotations ?? {}) as Record<string, string>;
  const preferred = annotations[DEFAULT_CONTAINER_ANNOTATION];
  const chosen = preferred && containers.includes(preferred) ? preferred : containers[0];
  if (!chosen) throw new BadGatewayError(`the cluster answered pod ${namespace}/${pod} without containers`);
  return chosen;
}
