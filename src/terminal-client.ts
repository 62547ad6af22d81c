// `kiteline terminal`: a shell in a pod through a gateway's terminal WebSocket
// (GET /api/v1/terminal/<ns>/<pod>/ws, Kite's JSON messages; docs/workloads.md "Terminals").
//
// From a terminal, stdin goes raw (every key, ^C included, reaches the pod's shell) and the
// terminal's size is sent at the start and on every SIGWINCH. From a pipe, the input is sent as it
// comes, and its end is typed as ^D, as at a terminal (again every second until the session ends):
// the shell exits at its prompt. The pod's TTY echoes what it is sent and prints its prompts,
// piped or not. `stdout` and `stderr` messages go to stdout and stderr, `info` and `error` to
// stderr; the result is the shell's exit code, or 1 when the session failed or the handshake was
// refused (its status and the gateway's message).
// The API key travels only in the Authorization header, and is never printed.
import { StringDecoder } from 'node:string_decoder';
import WebSocket from 'ws';
import { ConfigError } from './errors.js';

export interface TerminalTarget {
  /** The gateway's base URL (http or https). */
  server: string;
  key: string;
  cluster?: string | undefined;
  namespace: string;
  pod: string;
  container?: string | undefined;
  shell?: string | undefined;
}

/** What a terminal reads and writes (the process's own streams). */
export interface TerminalIo {
  stdin: NodeJS.ReadStream;
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
}

/** ^D: the end of input, as a terminal types it. */
const END_OF_INPUT = '\x04';
const END_OF_INPUT_REPEAT_MS = 1000;

/** The terminal WebSocket's URL on a gateway: http becomes ws, https wss. */
export function terminalUrl(target: TerminalTarget): string {
  let base: URL;
  try {
    base = new URL(target.server);
  } catch {
    throw new ConfigError(`--server must be a URL such as http://127.0.0.1:8080, got "${target.server}"`);
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:')
    throw new ConfigError(`--server must be an http or https URL, got "${target.server}"`);
  const path = `api/v1/terminal/${encodeURIComponent(target.namespace)}/${encodeURIComponent(target.pod)}/ws`;
  const url = new URL(path, base.href.endsWith('/') ? base.href : `${base.href}/`);
  url.protocol = base.protocol === 'https:' ? 'wss:' : 'ws:';
  if (target.container) url.searchParams.set('container', target.container);
  if (target.shell) url.searchParams.set('shell', target.shell);
  return url.href;
}

/** The message of a gateway's error body ({error, reason, code}), else the body itself. */
function refusalMessage(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: unknown };
    if (typeof parsed?.error === 'string') return parsed.error;
  } catch {
    /* not JSON */
  }
  return body.trim();
}

/** Runs one terminal session; resolves with the exit code for the process. */
export function runTerminal(target: TerminalTarget, io: TerminalIo): Promise<number> {
  const headers: Record<string, string> = { authorization: target.key };
  if (target.cluster) headers['x-cluster-name'] = target.cluster;
  const ws = new WebSocket(terminalUrl(target), { headers });
  const { stdin, stdout, stderr } = io;
  const screen = stdout.isTTY ? stdout : stderr.isTTY ? stderr : undefined;
  const raw = stdin.isTTY === true;

  return new Promise((resolve) => {
    let exitCode: number | undefined;
    let failed = false;
    let finished = false;
    const decoder = new StringDecoder('utf8');

    const send = (message: object) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(message));
    };
    const sendStdin = (data: string) => {
      if (data !== '') send({ type: 'stdin', data });
    };
    const onInput = (chunk: Buffer) => sendStdin(decoder.write(chunk));
    // A ^D typed before the shell reads its terminal (input piped in before it started) can be
    // lost: it is typed again every second until the session ends.
    let typingEnd: NodeJS.Timeout | undefined;
    const onInputEnd = () => {
      sendStdin(decoder.end() + END_OF_INPUT);
      typingEnd = setInterval(() => sendStdin(END_OF_INPUT), END_OF_INPUT_REPEAT_MS);
    };
    const sendSize = () => {
      if (screen?.columns && screen.rows) send({ type: 'resize', cols: screen.columns, rows: screen.rows });
    };
    const fail = (message: string) => {
      failed = true;
      stderr.write(`kiteline: ${message}\n`);
    };
    const finish = (code: number) => {
      if (finished) return;
      finished = true;
      clearInterval(typingEnd);
      stdin.off('data', onInput);
      stdin.off('end', onInputEnd);
      screen?.off('resize', sendSize);
      if (raw) stdin.setRawMode(false);
      stdin.pause();
      resolve(code);
    };

    ws.once('unexpected-response', (_request, response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => {
        const message = refusalMessage(body);
        fail(
          `the gateway refused the terminal: ${response.statusCode} ${response.statusMessage ?? ''}`.trim() +
            (message ? `: ${message}` : ''),
        );
        finish(1);
      });
    });
    ws.on('error', (err) => {
      if (finished) return;
      fail(err.message);
      finish(1);
    });
    ws.once('open', () => {
      if (raw) stdin.setRawMode(true);
      // The size first, then every change: Node emits 'resize' on the terminal's SIGWINCH.
      sendSize();
      screen?.on('resize', sendSize);
      stdin.on('data', onInput);
      if (!raw) stdin.once('end', onInputEnd);
      stdin.resume();
    });
    ws.on('message', (data) => {
      let message: { type?: string; data?: string; exitCode?: number };
      try {
        message = JSON.parse((data as Buffer).toString()) as typeof message; // binaryType: ws's default, 'nodebuffer'
      } catch {
        return fail('the gateway sent a message that is not JSON');
      }
      const text = typeof message.data === 'string' ? message.data : '';
      switch (message.type) {
        case 'stdout':
          stdout.write(text);
          break;
        case 'stderr':
          stderr.write(text);
          break;
        case 'info':
          stderr.write(`kiteline: ${text}\n`);
          break;
        case 'error':
          fail(text);
          break;
        case 'close':
          exitCode = typeof message.exitCode === 'number' ? message.exitCode : 1;
          break;
        // connected and pong need nothing.
      }
    });
    ws.once('close', (code, reason) => {
      if (exitCode === undefined && !failed)
        fail(`the terminal closed without the shell's exit code (${code}${reason.length ? ` ${String(reason)}` : ''})`);
      finish(exitCode ?? 1);
    });
  });
}
