// A container's log from the cluster's pods/log subresource, with Kite's query parameters and
// defaults (tailLines=100, -1 for all; timestamps=true; previous=false; sinceSeconds; container;
// follow). Read whole it is bounded (limitBytes upstream and a bounded read here) and answered as
// Kite's `{logs: [...], container, pod, namespace}`; followed, its lines go out as the container
// writes them: as server-sent events here (followLogAsEvents), over a WebSocket in log-fanout.ts.
import { Type, type Static } from 'typebox';
import type { ClusterConnection, UpstreamResponse } from '../clusters/types.js';
import { BadRequestError } from '../errors.js';
import type { UpstreamHeaders } from '../cluster-access/impersonation.js';
import { expectSuccess, readBody } from '../cluster-access/upstream.js';
import type { EventStream } from '../cluster-access/sse.js';
import { streamLines } from '../cluster-access/stream-lines.js';
import { DNS_LABEL_PATTERN } from '../cluster-access/segments.js';

/** The most of a log one answer carries when not following (the first this many bytes). */
export const MAX_LOG_BYTES = 8 * 1024 * 1024;
/** A followed line longer than this goes out in pieces of this size. */
export const MAX_LOG_LINE_BYTES = 256 * 1024;
/** Kite's default tail when the client sends none. */
const DEFAULT_TAIL_LINES = 100;

/** A container name (a DNS label). */
export const CONTAINER_PATTERN = DNS_LABEL_PATTERN;
/** A flag as the query string sends it. */
const booleanText = (description: string) =>
  Type.Optional(Type.Unsafe<'true' | 'false'>({ type: 'string', enum: ['true', 'false'], description }));

/** The query of the log routes, as sent (strings): checked by the route schema, parsed by logOptions. */
export const logQueryProperties = {
  container: Type.Optional(
    Type.String({ pattern: CONTAINER_PATTERN, description: 'the container; the only one when the pod has one' }),
  ),
  tailLines: Type.Optional(
    Type.String({
      pattern: '^(-1|0|[1-9][0-9]{0,8})$',
      description: 'the last N lines (default 100); -1 for the whole log',
    }),
  ),
  timestamps: booleanText('prefix each line with its RFC 3339 time (default true)'),
  previous: booleanText("the previous (terminated) container's log (default false)"),
  sinceSeconds: Type.Optional(
    Type.String({ pattern: '^[1-9][0-9]{0,9}$', description: 'only lines of the last N seconds' }),
  ),
  follow: booleanText('keep streaming new lines (server-sent events) instead of one JSON answer'),
  'x-cluster-name': Type.Optional(Type.String()),
};
export const LogQuery = Type.Object(logQueryProperties);
export type LogQuery = Static<typeof LogQuery>;

/** What the API server's pods/log takes. */
export interface LogOptions {
  container: string | undefined;
  /** undefined: the whole log. */
  tailLines: number | undefined;
  timestamps: boolean;
  previous: boolean;
  sinceSeconds: number | undefined;
  follow: boolean;
}

/** Kite's answer to a log read that does not follow. */
export interface LogsAnswer {
  logs: string[];
  container: string;
  pod: string;
  namespace: string;
}

/** The options of a query (schema-checked already; checked again here, never trusted blindly). */
export function logOptions(query: LogQuery, follow = query.follow === 'true'): LogOptions {
  const tail =
    query.tailLines === undefined || query.tailLines === ''
      ? DEFAULT_TAIL_LINES
      : integer('tailLines', query.tailLines, -1);
  const since =
    query.sinceSeconds === undefined || query.sinceSeconds === ''
      ? undefined
      : integer('sinceSeconds', query.sinceSeconds, 1);
  return {
    container: query.container || undefined,
    tailLines: tail === -1 ? undefined : tail,
    timestamps: query.timestamps !== 'false',
    previous: query.previous === 'true',
    sinceSeconds: since,
    follow,
  };
}

function integer(name: string, text: string, min: number): number {
  const value = Number(text);
  if (!/^-?\d+$/.test(text) || !Number.isSafeInteger(value) || value < min) {
    throw new BadRequestError(`invalid ${name} "${text.slice(0, 32)}": an integer of at least ${min}`);
  }
  return value;
}

/** The pods/log path on the API server. `limitBytes` bounds a read that does not follow. */
export function logPath(namespace: string, pod: string, options: LogOptions, container = options.container): string {
  const query = new URLSearchParams();
  if (container) query.set('container', container);
  if (options.follow) query.set('follow', 'true');
  if (options.timestamps) query.set('timestamps', 'true');
  if (options.previous) query.set('previous', 'true');
  if (options.tailLines !== undefined) query.set('tailLines', String(options.tailLines));
  if (options.sinceSeconds !== undefined) query.set('sinceSeconds', String(options.sinceSeconds));
  if (!options.follow) query.set('limitBytes', String(MAX_LOG_BYTES));
  return `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(pod)}/log?${query}`;
}

/**
 * Opens a container's log upstream as the caller; throws the cluster's error (no such pod or
 * container: 404/400) before any byte. A followed log goes on the watch pool.
 */
export async function openLog(
  conn: ClusterConnection,
  headers: UpstreamHeaders,
  namespace: string,
  pod: string,
  options: LogOptions,
  signal: AbortSignal,
  container = options.container,
): Promise<UpstreamResponse> {
  const res = await conn.request({
    method: 'GET',
    path: logPath(namespace, pod, options, container),
    headers: { accept: '*/*', ...headers },
    signal,
    longRunning: options.follow,
  });
  return expectSuccess(res);
}

/** Reads a log that does not follow as Kite's answer: its lines, the last empty one dropped. */
export async function readLog(
  conn: ClusterConnection,
  headers: UpstreamHeaders,
  namespace: string,
  pod: string,
  options: LogOptions,
  signal: AbortSignal,
): Promise<LogsAnswer> {
  const res = await openLog(conn, headers, namespace, pod, { ...options, follow: false }, signal);
  const text = await readBody(res, MAX_LOG_BYTES);
  const logs = text === '' ? [] : text.split('\n').map((line) => (line.endsWith('\r') ? line.slice(0, -1) : line));
  if (logs.length > 0 && logs[logs.length - 1] === '') logs.pop();
  return { logs, container: options.container ?? '', pod, namespace };
}

/** The end of a log, as readLogTail keeps it. */
export interface LogTail {
  lines: string[];
  /** Lines read but left out (older than the kept ones). */
  dropped: number;
  /** The upstream read stopped at MAX_LOG_BYTES: the newest lines may be missing. */
  cut: boolean;
}

/**
 * The newest lines of a log that does not follow, at most `maxBytes` of them: the bounded upstream
 * read is streamed and only its end kept, so memory stays about `maxBytes` whatever the log holds
 * (for answers that must stay small, like an MCP tool's). A last line longer than `maxBytes`
 * keeps its end.
 */
export async function readLogTail(
  conn: ClusterConnection,
  headers: UpstreamHeaders,
  namespace: string,
  pod: string,
  options: LogOptions,
  signal: AbortSignal,
  maxBytes: number,
): Promise<LogTail> {
  const res = await openLog(conn, headers, namespace, pod, { ...options, follow: false }, signal);
  let received = 0;
  let endsWithNewline = true;
  const counted = (async function* () {
    for await (const chunk of res as AsyncIterable<Buffer>) {
      received += chunk.length;
      if (chunk.length > 0) endsWithNewline = chunk[chunk.length - 1] === 0x0a;
      yield chunk;
    }
  })();
  const lines: string[] = [];
  let kept = 0;
  let dropped = 0;
  for await (const line of streamLines(counted, MAX_LOG_LINE_BYTES)) {
    const size = Buffer.byteLength(line) + 1;
    lines.push(line);
    kept += size;
    while (kept > maxBytes && lines.length > 1) {
      kept -= Buffer.byteLength(lines.shift()!) + 1;
      dropped += 1;
    }
  }
  const cut = received >= MAX_LOG_BYTES;
  // A read cut at the limit ends inside a line: that fragment is not the log's newest line.
  if (cut && !endsWithNewline && lines.length > 1) lines.pop();
  const last = lines.length === 1 ? Buffer.from(lines[0]) : undefined;
  if (last && last.length > maxBytes) lines[0] = last.subarray(last.length - maxBytes).toString('utf8');
  return { lines, dropped, cut };
}

/**
 * Kite's log-follow events: `connected` ({"status":"connected"}), one `log` per line (the line as
 * its data), `close` ({"status":"closed"}) when the container's stream ends, `error` ({"error"})
 * when it breaks. Returns when the log ends or the client leaves (the caller's signal aborts the
 * upstream stream, which ends the loop).
 */
export async function followLogAsEvents(events: EventStream, log: UpstreamResponse): Promise<void> {
  await events.sendJson('connected', { status: 'connected' });
  try {
    for await (const line of streamLines(log, MAX_LOG_LINE_BYTES)) {
      if (events.closed) break;
      await events.send('log', line);
    }
    await events.sendJson('close', { status: 'closed' });
  } catch (err) {
    if (!events.closed) await events.sendJson('error', { error: `the log stream broke: ${(err as Error).message}` });
  } finally {
    log.once('error', () => undefined);
    log.destroy();
    events.end();
  }
}
