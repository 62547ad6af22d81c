// The one place where errors become HTTP answers. Every error body is
// {"error", "reason", "code"[, "details"]}; anything that is not a known client error is a bug:
// logged with its request id and answered 500 without internals.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { HttpError, TooManyRequestsError, reasonOf } from '../../errors.js';
import { translateHostError } from '../../host/host-errors.js';

/** Maps any thrown value to an HttpError; undefined means "a bug" (500). */
export function toHttpError(err: unknown): HttpError | undefined {
  if (err instanceof HttpError) return err;
  // A host-cluster failure that reached here untranslated (host-errors.ts has the one mapping).
  const host = translateHostError(err, 'a host-cluster call');
  if (host instanceof HttpError) return host;
  const fe = err as Partial<FastifyError> & { validation?: unknown; validationContext?: string };
  if (fe?.validation) {
    return new HttpError(400, 'BadRequest', `invalid request: ${fe.message}`);
  }
  if (fe?.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return new HttpError(413, 'RequestEntityTooLarge', 'request body is larger than the limit');
  }
  if (fe?.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return new HttpError(415, 'UnsupportedMediaType', fe.message ?? 'unsupported media type');
  }
  const status = fe?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return new HttpError(status, reasonOf(status, 'BadRequest'), fe.message || 'bad request');
  }
  return undefined;
}

/**
 * Fastify's `frameworkErrors`: what its router refuses before any route or hook runs (a path that
 * does not percent-decode), answered in the same error shape.
 */
export function frameworkError(err: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  const status =
    typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 400;
  const message =
    err.code === 'FST_ERR_BAD_URL' ? 'malformed URL: a percent-encoding that does not decode' : err.message;
  void reply.code(status).send({ error: message, reason: reasonOf(status, 'BadRequest'), code: status });
}

export default fp(
  async function errors(app: FastifyInstance) {
    app.setErrorHandler((err, request, reply) => {
      const known = toHttpError(err);
      if (!known) {
        request.log.error({ err }, 'unhandled error');
        return reply
          .code(500)
          .send({ error: `internal error (request id ${request.id})`, reason: 'InternalError', code: 500 });
      }
      if (known.status >= 500)
        request.log.warn(
          {
            status: known.status,
            reason: known.reason,
            msg: known.message,
            ...(known.cause instanceof Error ? { cause: known.cause.message } : {}),
          },
          'upstream error',
        );
      if (known instanceof TooManyRequestsError) reply.header('retry-after', String(known.retryAfterSeconds));
      return reply.code(known.status).send(known.toBody());
    });

    app.setNotFoundHandler((request, reply) => {
      const path = request.url.split('?')[0];
      reply.code(404).send({ error: `route not found: ${request.method} ${path}`, reason: 'NotFound', code: 404 });
    });
  },
  { name: 'kiteline-errors' },
);
