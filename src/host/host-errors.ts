// The one translation of host API server failures into the error hierarchy (errors.ts). Every
// client the host layer calls through (HostStore's `core`, `customObjects`, `coordination`) is
// wrapped by translatingClient, so a store never reads a raw status: it catches NotFoundError,
// ConflictError (reason AlreadyExists for a create that collided, Conflict for a lost
// compare-and-swap) or lets the error reach the route, which answers with its status.
//
//   host status            error (HTTP to our caller)
//   400, 422               BadRequestError / 422 Invalid, with the host's message (bad input)
//   401, 403               HostPermissionError: 503, logged once per call site with what was refused
//   404                    NotFoundError
//   409                    ConflictError (AlreadyExists or Conflict)
//   410                    ConflictError: the object moved on; try again
//   429                    TooManyRequestsError with the host's Retry-After
//   5xx, unreachable       ServiceUnavailableError: 503, try again
//   anything else          left as is (a 500: a bug to fix)
import * as k8s from '@kubernetes/client-node';
import {
  BadRequestError,
  ConflictError,
  HttpError,
  NotFoundError,
  ServiceUnavailableError,
  TooManyRequestsError,
} from '../errors.js';
import type { Logger } from '../log.js';

/** kiteline's own identity may not do something on the host cluster (its RBAC is missing). */
export class HostPermissionError extends ServiceUnavailableError {
  constructor(what: string) {
    super(
      `kiteline is not allowed to ${what} on the host cluster; ` +
        "an operator must restore its RBAC (see the gateway's log)",
    );
  }
}

/** The HTTP status of a failed client-node call, or undefined for network and other errors. */
export function apiStatus(err: unknown): number | undefined {
  if (err instanceof k8s.ApiException) return err.code;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

/** The `message` and `reason` of the Status a client-node error carries (its body), if any. */
function statusOf(err: k8s.ApiException<unknown>): { message: string; reason: string } {
  try {
    const body = (typeof err.body === 'string' ? JSON.parse(err.body) : err.body) as {
      message?: unknown;
      reason?: unknown;
    } | null;
    return {
      message: typeof body?.message === 'string' ? body.message : '',
      reason: typeof body?.reason === 'string' ? body.reason : '',
    };
  } catch {
    return { message: '', reason: '' };
  }
}

/** A short, secret-free description of a client-node error (its message embeds whole bodies). */
export function describeApiError(err: unknown): string {
  if (err instanceof HttpError) return `HTTP ${err.status}: ${err.message}`;
  if (err instanceof k8s.ApiException) {
    const { message } = statusOf(err);
    return `HTTP ${err.code}${message ? `: ${message}` : ''}`;
  }
  return (err as Error)?.message ?? String(err);
}

/** Network failures of a host-cluster call: the host API server is down, restarting or cut off. */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EPIPE',
  'EAI_AGAIN',
]);

function unreachable(err: unknown): ServiceUnavailableError | undefined {
  const e = err as { name?: unknown; code?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  if (e?.name === 'FetchError' || UNREACHABLE_CODES.has(code)) {
    return new ServiceUnavailableError(`the host cluster is unavailable${code ? ` (${code})` : ''}; try again`);
  }
  return undefined;
}

/**
 * The error to throw for a failed host call; `what` names the call for messages and logs
 * ("create users.kiteline.io kiteline/user-alice"). Errors that are already ours pass through.
 */
export function translateHostError(err: unknown, what: string, log?: Logger): unknown {
  if (err instanceof HttpError) return err;
  if (!(err instanceof k8s.ApiException)) return unreachable(err) ?? err;
  const { message, reason } = statusOf(err);
  const code = err.code;
  const detail = message || `HTTP ${code}`;
  switch (true) {
    case code === 400:
      return new BadRequestError(`the host cluster refused ${what}: ${detail}`);
    case code === 422:
      return new HttpError(422, 'Invalid', `the host cluster refused ${what}: ${detail}`);
    case code === 401 || code === 403:
      log?.error(
        { call: what, status: code, hostMessage: message },
        'the host cluster refused kiteline its own RBAC: the call failed',
      );
      return new HostPermissionError(what);
    case code === 404:
      return new NotFoundError(`not found on the host cluster: ${what}`);
    case code === 409:
      return reason === 'AlreadyExists'
        ? new ConflictError(`already exists on the host cluster: ${what}`, 'AlreadyExists')
        : new ConflictError(`changed meanwhile on the host cluster: ${what}; try again`);
    case code === 410:
      return new ConflictError(`the host cluster's view moved on during ${what}; try again`);
    case code === 429: {
      const retryAfter = Number(err.headers?.['retry-after']);
      return new TooManyRequestsError(
        `the host cluster is busy (${what}); try again`,
        Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : 1,
      );
    }
    case code >= 500:
      return new ServiceUnavailableError(`the host cluster could not complete ${what} (HTTP ${code}); try again`);
    default:
      return err;
  }
}

/** A NotFoundError, whatever the host call: for "absent is fine" reads and deletes. */
export const isNotFound = (err: unknown): boolean => err instanceof NotFoundError;
/** A create that collided with an existing object. */
export const isAlreadyExists = (err: unknown): boolean =>
  err instanceof ConflictError && err.reason === 'AlreadyExists';
/** A compare-and-swap that lost (the object changed since it was read). */
export const isStale = (err: unknown): boolean => err instanceof ConflictError && err.reason === 'Conflict';

/** "create secrets kiteline/name" from a client method name and its request object. */
function describeCall(method: string, args: unknown[]): string {
  const request = (args[0] ?? {}) as { name?: unknown; namespace?: unknown; plural?: unknown };
  const verb = /^(create|read|replace|patch|delete|list|get)/.exec(method)?.[1] ?? method;
  const resource =
    typeof request.plural === 'string'
      ? request.plural
      : method
          .replace(/^(create|read|replace|patch|delete|list|get)(Namespaced)?/, '')
          .replace(/Status$/, '/status')
          .toLowerCase();
  const where = [request.namespace, request.name].filter((p): p is string => typeof p === 'string').join('/');
  return `${verb} ${resource}${where ? ` ${where}` : ''}`;
}

/**
 * The client with every method's failure translated by translateHostError: the single place a
 * host status turns into an error of ours.
 */
export function translatingClient<T extends object>(client: T, log: Logger): T {
  return new Proxy(client, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== 'function' || typeof property !== 'string') return value;
      return (...args: unknown[]) => {
        const result = (value as (...a: unknown[]) => unknown).apply(target, args);
        if (!(result instanceof Promise)) return result;
        return result.catch((err: unknown) => {
          throw translateHostError(err, describeCall(property, args), log);
        });
      };
    },
  });
}
