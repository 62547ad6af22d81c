// Helpers of the workload tests (logs, live pod list, proxies): busybox pods on the target-a node
// in a namespace of the test's own, kubectl that does not block the event loop (the gateway runs
// in this process and must keep streaming meanwhile), a server-sent-events reader over fetch, and
// a WebSocket client (`ws`) that collects JSON messages.
import { spawn } from 'node:child_process';
import WebSocket from 'ws';
import { ensureBinaries } from '../../src/controlplane/binaries.js';
import { kubectlInBackground } from './clusters.js';
import { eventually } from './eventually.js';

export const BUSYBOX = 'kiteline.local/busybox:1';

/** A busybox pod manifest (short grace period: busybox as PID 1 ignores SIGTERM). */
export function busyboxPod(
  name: string,
  labels: Record<string, string>,
  command: string[],
  extra: object = {},
): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels },
    spec: {
      terminationGracePeriodSeconds: 1,
      containers: [{ name: 'main', image: BUSYBOX, imagePullPolicy: 'Never', command, ...extra }],
    },
  };
}

/**
 * `kubectl attach -i` to a pod that echoes each stdin line as "got <line>" (env picks the transport,
 * e.g. KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false for SPDY); resolves once a line made the round trip,
 * then ends kubectl. The first lines may arrive before the stream is up: it keeps writing.
 */
export async function attachRoundTrip(
  kubeconfig: string,
  namespace: string,
  pod: string,
  env: Record<string, string> = {},
): Promise<void> {
  const child = spawn(ensureBinaries().kubectl, ['--kubeconfig', kubeconfig, '-n', namespace, 'attach', '-i', pod], {
    env: { ...process.env, ...env },
  });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
  try {
    await eventually(
      'the attached container to echo stdin',
      () => {
        child.stdin.write('through-kiteline\n');
        return out.includes('got through-kiteline');
      },
      60_000,
      500,
    );
  } finally {
    child.kill();
  }
}

/** kubectl in a namespace, in the background; throws with kubectl's stderr when it fails. */
export function namespacedKubectl(kubeconfig: string, namespace: string) {
  return async (args: string[], input?: string): Promise<string> => {
    const res = await kubectlInBackground(kubeconfig, ['-n', namespace, ...args], input);
    if (res.status !== 0) throw new Error(`kubectl ${args.join(' ')}: ${res.stderr || res.stdout}`);
    return res.stdout;
  };
}

export interface SseEvent {
  event: string;
  data: string;
}

/** An open server-sent-events answer: its status and headers, and the events as they come. */
export interface SseReader {
  status: number;
  headers: Headers;
  events: SseEvent[];
  /** Every raw line received (comments included). */
  raw: string[];
  /** Waits until some event satisfies the check; returns it. */
  waitFor(what: string, check: (event: SseEvent) => boolean, timeoutMs?: number): Promise<SseEvent>;
  /** Whether the server ended the stream. */
  ended: () => boolean;
  close(): void;
}

/** Opens a server-sent-events stream with fetch and parses it as it arrives. */
export async function openSse(url: string, headers: Record<string, string>): Promise<SseReader> {
  const controller = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: controller.signal });
  const events: SseEvent[] = [];
  const raw: string[] = [];
  let done = false;
  if (res.ok && res.body) {
    void (async () => {
      const decoder = new TextDecoder();
      let buffer = '';
      let current: SseEvent = { event: 'message', data: '' };
      let hasData = false;
      try {
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          buffer += decoder.decode(chunk, { stream: true });
          let newline: number;
          while ((newline = buffer.indexOf('\n')) >= 0) {
            const line = buffer.slice(0, newline);
            buffer = buffer.slice(newline + 1);
            raw.push(line);
            if (line === '') {
              if (hasData) events.push(current);
              current = { event: 'message', data: '' };
              hasData = false;
            } else if (line.startsWith('event: ')) current.event = line.slice(7);
            else if (line.startsWith('data: ')) {
              current.data = hasData ? `${current.data}\n${line.slice(6)}` : line.slice(6);
              hasData = true;
            }
          }
        }
      } catch {
        /* aborted */
      }
      done = true;
    })();
  } else {
    await res.text().catch(() => '');
    done = true;
  }
  return {
    status: res.status,
    headers: res.headers,
    events,
    raw,
    ended: () => done,
    waitFor: (what, check, timeoutMs = 30_000) => eventually(what, () => events.find(check), timeoutMs, 20),
    close: () => controller.abort(),
  };
}

export interface WsMessage {
  type: string;
  data: string;
  pod?: string;
  container?: string;
}

/** A WebSocket that collects every JSON message it receives. */
export interface WsClient {
  ws: WebSocket;
  messages: WsMessage[];
  waitFor(what: string, check: (message: WsMessage) => boolean, timeoutMs?: number): Promise<WsMessage>;
  closed: () => boolean;
}

/** Opens a WebSocket; rejects with the HTTP status when the handshake is refused. */
export function openWs(url: string, headers: Record<string, string>): Promise<WsClient> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    const messages: WsMessage[] = [];
    let closed = false;
    ws.on('message', (data: Buffer) => messages.push(JSON.parse(data.toString('utf8')) as WsMessage));
    ws.on('close', () => (closed = true));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString('utf8')));
      res.on('end', () =>
        reject(
          Object.assign(new Error(`handshake refused: ${res.statusCode} ${body}`), { status: res.statusCode, body }),
        ),
      );
    });
    ws.once('error', reject);
    ws.once('open', () =>
      resolve({
        ws,
        messages,
        closed: () => closed,
        waitFor: (what, check, timeoutMs = 30_000) => eventually(what, () => messages.find(check), timeoutMs, 20),
      }),
    );
  });
}

/** The status of a refused WebSocket handshake (0 when it was accepted, and then closed). */
export async function wsRefusal(url: string, headers: Record<string, string>): Promise<number> {
  try {
    const client = await openWs(url, headers);
    client.ws.close();
    return 0;
  } catch (err) {
    return (err as { status?: number }).status ?? -1;
  }
}
