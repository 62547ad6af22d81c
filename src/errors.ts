// One typed error hierarchy for the whole service, mapped to HTTP in one place
// (gateway/plugins/errors.ts uses toErrorBody). Every error body is
// {"error": <message>, "reason": <Reason>, "code": <status>, "details"?: {...}} (README.md, "Errors").

export interface ErrorBody {
  error: string;
  reason: string;
  code: number;
  details?: unknown;
}

/** An error that knows its HTTP status and Kubernetes-style reason. */
export class HttpError extends Error {
  readonly status: number;
  readonly reason: string;
  readonly details?: unknown;

  constructor(status: number, reason: string, message: string, details?: unknown) {
    super(message);
    this.name = new.target.name;
    this.status = status;
    this.reason = reason;
    if (details !== undefined) this.details = details;
  }

  toBody(): ErrorBody {
    const body: ErrorBody = { error: this.message, reason: this.reason, code: this.status };
    if (this.details !== undefined) body.details = this.details;
    return body;
  }
}

export class BadRequestError extends HttpError {
  constructor(message: string, details?: unknown) {
    super(400, 'BadRequest', message, details);
  }
}

export class UnauthorizedError extends HttpError {
  constructor(message = 'authentication required') {
    super(401, 'Unauthorized', message);
  }
}

/**
 * 401 with reason SecondFactorRequired: the caller is known, but the action needs a second factor
 * proved more recently (docs/second-factors.md); details say how recently.
 */
export class SecondFactorRequiredError extends HttpError {
  constructor(message: string, details: { maxAgeSeconds: number; cluster?: string; secondFactorAt?: number }) {
    super(401, 'SecondFactorRequired', message, details);
  }
}

export class ForbiddenError extends HttpError {
  constructor(message: string) {
    super(403, 'Forbidden', message);
  }
}

export class NotFoundError extends HttpError {
  constructor(message: string) {
    super(404, 'NotFound', message);
  }
}

export class ConflictError extends HttpError {
  /** reason is `AlreadyExists` for duplicates and `Conflict` for stale writes or forbidden states. */
  constructor(message: string, reason: 'AlreadyExists' | 'Conflict' = 'Conflict') {
    super(409, reason, message);
  }
}

export class PayloadTooLargeError extends HttpError {
  constructor(message: string) {
    super(413, 'RequestEntityTooLarge', message);
  }
}

export class TooManyRequestsError extends HttpError {
  readonly retryAfterSeconds: number;
  constructor(message: string, retryAfterSeconds: number) {
    super(429, 'TooManyRequests', message);
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** The target cluster answered badly or could not be reached. */
export class BadGatewayError extends HttpError {
  constructor(message: string) {
    super(502, 'BadGateway', message);
  }
}

/** The target cluster is registered but not ready. */
export class ServiceUnavailableError extends HttpError {
  constructor(message: string) {
    super(503, 'ServiceUnavailable', message);
  }
}

export class GatewayTimeoutError extends HttpError {
  constructor(message: string) {
    super(504, 'Timeout', message);
  }
}

/** A Kubernetes `Status` object as the API server sends it. */
export interface KubeStatus {
  kind?: string;
  status?: string;
  message?: string;
  reason?: string;
  code?: number;
  details?: unknown;
}

export function isKubeStatus(value: unknown): value is KubeStatus {
  return typeof value === 'object' && value !== null && (value as KubeStatus).kind === 'Status';
}

/**
 * An error the target cluster answered with: keeps the cluster's status code, reason and details.
 * A 5xx from the cluster is a bad answer for our client: it becomes 502 unless it is 503/504.
 */
export function fromKubeStatus(status: KubeStatus, httpStatus?: number): HttpError {
  const code = status.code ?? httpStatus ?? 502;
  const reason = status.reason || reasonOf(code);
  const message = status.message || `cluster answered ${code} ${reason}`;
  if (code >= 500 && code !== 503 && code !== 504) {
    return new HttpError(502, 'BadGateway', `cluster error: ${message}`, status.details);
  }
  return new HttpError(code, reason, message, status.details);
}

/** The status reason of an HTTP status code, as Kubernetes names them. */
const REASONS: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  406: 'NotAcceptable',
  409: 'Conflict',
  410: 'Expired',
  413: 'RequestEntityTooLarge',
  414: 'URITooLong',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  429: 'TooManyRequests',
  431: 'RequestHeaderFieldsTooLarge',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

export function reasonOf(code: number, fallback = 'Unknown'): string {
  return REASONS[code] ?? fallback;
}

/**
 * The error an operation rejects with when its caller went away (name AbortError, as fetch and
 * undici use). Not an HttpError: nobody is left to answer; the route turns it into a 499.
 */
export function abortError(message: string, cause?: unknown): Error {
  const err = new Error(message, cause === undefined ? undefined : { cause });
  err.name = 'AbortError';
  return err;
}

/** Raised at start-up for invalid configuration (never reaches HTTP). */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}
