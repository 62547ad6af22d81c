// The cluster's answers: 2xx bodies of lists and watches stream to the client unbuffered; a GET of
// one object arrives read whole (bounded, ClusterConnection.readObject) and goes out in one write;
// anything else is read (bounded) as a Kubernetes Status and rethrown as an HttpError that keeps
// the cluster's code, reason and details (fromKubeStatus).
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyReply } from 'fastify';
import type { BufferedAnswer, UpstreamResponse } from '../clusters/types.js';
import { BadGatewayError, fromKubeStatus, HttpError, isKubeStatus, type KubeStatus } from '../errors.js';
import type { UpstreamHeaders } from './impersonation.js';

/** Error bodies larger than this are cut (a Status is a few hundred bytes). */
const MAX_ERROR_BODY = 256 * 1024;
/** Small JSON answers read whole by the gateway itself (delete answers, overview pages). */
const MAX_JSON_BODY = 64 * 1024 * 1024;

export function isSuccess(res: Pick<UpstreamResponse, 'statusCode'>): boolean {
  const status = res.statusCode;
  return status >= 200 && status < 300;
}

/** Reads a response body up to `limit` bytes (the rest is discarded and the stream closed). */
export async function readBody(res: UpstreamResponse, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res) {
    const buf = chunk as Buffer;
    if (size + buf.length > limit) {
      chunks.push(buf.subarray(0, limit - size));
      res.destroy();
      break;
    }
    chunks.push(buf);
    size += buf.length;
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The HttpError for a non-2xx answer of the cluster. */
export async function errorFromResponse(res: UpstreamResponse): Promise<HttpError> {
  let text = '';
  try {
    text = await readBody(res, MAX_ERROR_BODY);
  } catch {
    /* a broken error body still has a status code */
  }
  return errorFromBody(res.statusCode, text);
}

/** The HttpError for a non-2xx status and the body that came with it. */
function errorFromBody(status: number, text: string): HttpError {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (status === 401) {
    // The cluster refused kiteline's own credentials: not the caller's fault, and not their 401.
    return new BadGatewayError(
      "the cluster rejected kiteline's credentials for it (401): check the registered kubeconfig",
    );
  }
  const kubeStatus: KubeStatus = isKubeStatus(parsed) ? parsed : {};
  return fromKubeStatus({ ...kubeStatus, code: status }, status);
}

/** The client went away before the answer was complete (nginx's 499): logged, never sent. */
export function clientClosed(): HttpError {
  return new HttpError(499, 'ClientClosedRequest', 'the client closed the request');
}

/** Throws the cluster's error unless the answer is 2xx. */
export async function expectSuccess(res: UpstreamResponse): Promise<UpstreamResponse> {
  if (!isSuccess(res)) throw await errorFromResponse(res);
  return res;
}

/** Reads a 2xx JSON answer whole (only for bounded answers the gateway itself needs). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- routes/resources.ts passes an object on unread
export async function readJson<T = any>(res: UpstreamResponse): Promise<T> {
  await expectSuccess(res);
  const text = await readBody(res, MAX_JSON_BODY);
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new BadGatewayError('the cluster answered with a body that is not JSON');
  }
}

/**
 * The media types a cluster may answer with: what kiteline asks for (JSON) and the other encodings
 * the Kubernetes API speaks. Anything else (text/html, image/svg+xml, ...) from a hostile or broken
 * cluster would be rendered by a browser on kiteline's origin, with the user's session: a 502.
 */
const KUBERNETES_MEDIA_TYPES: ReadonlySet<string> = new Set([
  'application/json',
  'application/yaml',
  'application/vnd.kubernetes.protobuf',
]);

/** The cluster's content type when it is one the Kubernetes API speaks; throws 502 otherwise. */
function kubernetesContentType(headers: IncomingHttpHeaders): string {
  const contentType = headers['content-type'] ?? '';
  const mediaType = contentType.split(';', 1)[0].trim().toLowerCase();
  if (!KUBERNETES_MEDIA_TYPES.has(mediaType)) {
    throw new BadGatewayError(
      `the cluster answered with a content type the Kubernetes API does not use (${mediaType.slice(0, 64) || 'none'})`,
    );
  }
  return contentType;
}

/** The cluster's content type and encoding on the reply, with nosniff so no browser guesses another. */
function answerHeaders(reply: FastifyReply, headers: IncomingHttpHeaders): void {
  reply.header('content-type', kubernetesContentType(headers));
  reply.header('x-content-type-options', 'nosniff');
  const encoding = headers['content-encoding'];
  if (encoding) reply.header('content-encoding', encoding);
}

/** Sends an object read (BufferedAnswer) to the client, or throws the cluster's error. */
export function sendObject(reply: FastifyReply, answer: BufferedAnswer): FastifyReply {
  if (!isSuccess(answer))
    throw errorFromBody(answer.statusCode, answer.body.subarray(0, MAX_ERROR_BODY).toString('utf8'));
  answerHeaders(reply, answer.headers);
  reply.code(answer.statusCode);
  return reply.send(answer.body);
}

/**
 * Sends a 2xx upstream answer to the client as a stream with its status and content type.
 * `flushHeaders` sends the head at once (watches: the first event may be minutes away).
 */
export function streamToClient(
  reply: FastifyReply,
  res: UpstreamResponse,
  options: { flushHeaders?: boolean } = {},
): FastifyReply {
  try {
    answerHeaders(reply, res.headers);
  } catch (err) {
    // Dropped unread: undici reports that as an 'error' on the body, which nobody else listens to.
    res.once('error', () => undefined);
    res.destroy();
    throw err;
  }
  reply.code(res.statusCode);
  // The bytes pass through unchanged, so the cluster's length holds: the answer goes out framed by
  // it (head and a small body in one write) instead of chunked with a terminating write.
  const length = res.headers['content-length'];
  if (length !== undefined && !options.flushHeaders) reply.header('content-length', length);
  if (options.flushHeaders) {
    reply.raw.once('pipe', () => reply.raw.flushHeaders());
  }
  return reply.send(res);
}

/** Headers and body of an upstream write (ClusterConnection.request() frames it with Content-Length). */
export function bodyRequest(
  contentType: string,
  body: string,
  extra: UpstreamHeaders,
): { headers: UpstreamHeaders; body: string } {
  return { headers: { accept: 'application/json', ...extra, 'content-type': contentType }, body };
}
