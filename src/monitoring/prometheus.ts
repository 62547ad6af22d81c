// kiteline's calls to a cluster's Prometheus (spec.prometheusURL, docs/monitoring.md): its HTTP
// API's /api/v1/query and /api/v1/query_range, sent straight to the URL the admin registered.
// Bounded: a connect timeout, a whole-call timeout (also sent to Prometheus as `timeout`, so it stops
// evaluating), and a cap on the answer read. Every connection resolves its host through the guard
// that keeps kiteline off link-local and cloud metadata addresses (as cluster connections do), and
// redirects are not followed. No credentials are sent: a Prometheus behind authentication is not
// supported (a URL with user:password@ is refused when registered, and never used).
import { Agent, request } from 'undici';
import { guardedLookup, refusedAddress, REFUSED_WHY } from '../credentials/refused-addresses.js';
import {
  BadGatewayError,
  BadRequestError,
  GatewayTimeoutError,
  HttpError,
  ServiceUnavailableError,
  abortError,
} from '../errors.js';

/** Connecting to Prometheus may take this long. */
const CONNECT_TIMEOUT_MS = 5_000;
/** One query, from sending it to the last byte of its answer. */
export const QUERY_TIMEOUT_MS = 30_000;
/** The largest answer read (a passthrough query asking for everything is cut off here). */
export const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

let agent: Agent | undefined;

function dispatcher(): Agent {
  agent ??= new Agent({
    connect: { timeout: CONNECT_TIMEOUT_MS, lookup: guardedLookup() },
    keepAliveTimeout: 10_000,
    headersTimeout: QUERY_TIMEOUT_MS,
    bodyTimeout: QUERY_TIMEOUT_MS,
  });
  return agent;
}

/** The URL of an API endpoint under a registered prometheusURL, or the 503 that says why it is not usable. */
function apiUrl(prometheusURL: string, cluster: string, endpoint: Endpoint): URL {
  if (!prometheusURL) throw new ServiceUnavailableError(`Prometheus is not configured for cluster ${cluster}`);
  let url: URL;
  try {
    url = new URL(prometheusURL);
  } catch {
    throw new ServiceUnavailableError(`the prometheusURL of cluster ${cluster} is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new ServiceUnavailableError(`the prometheusURL of cluster ${cluster} is not http(s)`);
  if (url.username || url.password)
    throw new ServiceUnavailableError(
      `the prometheusURL of cluster ${cluster} carries credentials, which are not sent`,
    );
  if (refusedAddress(url.hostname))
    throw new ServiceUnavailableError(`the prometheusURL of cluster ${cluster} is ${REFUSED_WHY}`);
  // Under the URL's path (a Prometheus served below a prefix), without its query or fragment.
  return new URL(`${url.pathname.replace(/\/+$/, '')}/api/v1/${endpoint}`, url.origin);
}

/** A query's parameters as Prometheus takes them (query, time / start, end, step). */
export type QueryParams = Record<string, string>;

export type Endpoint = 'query' | 'query_range';

/**
 * Sends one query to the cluster's Prometheus and resolves with its answer as Prometheus wrote it
 * (JSON, `status: "success"`). Prometheus' own refusals keep their meaning (400 bad query, 422 the
 * query could not be executed, 503 it timed out or is overloaded); unreachable or a bad answer is 502.
 */
export async function prometheusQuery(
  target: { prometheusURL: string; name: string },
  endpoint: Endpoint,
  params: QueryParams,
  clientSignal: AbortSignal,
): Promise<Buffer> {
  const url = apiUrl(target.prometheusURL, target.name, endpoint);
  const timeout = AbortSignal.timeout(QUERY_TIMEOUT_MS);
  const signal = AbortSignal.any([clientSignal, timeout]);
  const body = new URLSearchParams({ ...params, timeout: `${QUERY_TIMEOUT_MS / 1000}s` }).toString();
  let status: number;
  let answer: Buffer;
  try {
    const res = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body,
      dispatcher: dispatcher(),
      signal,
    });
    status = res.statusCode;
    answer = await readCapped(res.body);
  } catch (err) {
    if (clientSignal.aborted) throw abortError('the client went away', err);
    if (timeout.aborted)
      throw new GatewayTimeoutError(`the Prometheus of cluster ${target.name} did not answer in time`);
    if (err instanceof HttpError) throw err;
    // The error's code only: its message names the address, which is the admin's to see.
    const why = (err as { code?: unknown }).code;
    throw new BadGatewayError(
      `the Prometheus of cluster ${target.name} could not be reached${typeof why === 'string' ? ` (${why})` : ''}`,
    );
  }
  return checked(answer, status, target.name);
}

async function readCapped(body: AsyncIterable<Buffer> & { destroy(): void }): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > MAX_ANSWER_BYTES) {
      body.destroy();
      const mib = MAX_ANSWER_BYTES / (1024 * 1024);
      throw new BadRequestError(`the answer is larger than ${mib} MiB: narrow the query (fewer series, a larger step)`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

interface ApiAnswer {
  status?: string;
  errorType?: string;
  error?: string;
}

function checked(answer: Buffer, status: number, cluster: string): Buffer {
  let parsed: ApiAnswer | undefined;
  try {
    parsed = JSON.parse(answer.toString('utf8')) as ApiAnswer;
  } catch {
    parsed = undefined;
  }
  if (status === 200 && parsed?.status === 'success') return answer;
  const message = `Prometheus: ${parsed?.error ?? `answered HTTP ${status}`}`;
  if (status === 400) throw new BadRequestError(message);
  if (status === 422) throw new HttpError(422, 'Invalid', message);
  if (status === 503) throw new ServiceUnavailableError(message);
  throw new BadGatewayError(`the Prometheus of cluster ${cluster} answered badly: ${message}`);
}

/** One point of a series: Kite's `UsageDataPoint`. */
export interface UsagePoint {
  timestamp: string;
  value: number;
}

/**
 * The first series of a range query's matrix as Kite's points (Kite's charts draw one line per
 * query, each a sum). Points whose value is not a finite number (NaN, ±Inf: a division by a zero
 * capacity) are left out, as JSON cannot carry them.
 */
export async function firstSeries(
  target: { prometheusURL: string; name: string },
  query: string,
  range: { start: number; end: number; stepSeconds: number },
  signal: AbortSignal,
): Promise<UsagePoint[]> {
  const answer = await prometheusQuery(
    target,
    'query_range',
    {
      query,
      start: (range.start / 1000).toFixed(3),
      end: (range.end / 1000).toFixed(3),
      step: String(range.stepSeconds),
    },
    signal,
  );
  const data = (JSON.parse(answer.toString('utf8')) as { data?: { resultType?: string; result?: unknown } }).data;
  if (data?.resultType !== 'matrix' || !Array.isArray(data.result))
    throw new BadGatewayError(`Prometheus answered a ${data?.resultType ?? 'malformed'} result to a range query`);
  const first = data.result[0] as { values?: Array<[number, string]> } | undefined;
  const points: UsagePoint[] = [];
  for (const [seconds, text] of first?.values ?? []) {
    const value = Number(text);
    if (Number.isFinite(value)) points.push({ timestamp: new Date(seconds * 1000).toISOString(), value });
  }
  return points;
}
