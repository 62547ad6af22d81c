// kiteline's own answers on the proxy are Kubernetes Status objects, as the API server's are, so
// kubectl and client libraries print them as usual ("Error from server (Forbidden): ...").
import type { HttpError } from '../errors.js';

export interface StatusBody {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure';
  message: string;
  reason: string;
  code: number;
  details?: unknown;
}

/** The Status of an error (a non-HttpError is an internal error, named by the request id only). */
export function statusOf(err: HttpError | undefined, requestId: string): StatusBody {
  if (!err) return status(500, 'InternalError', `internal error (request id ${requestId})`);
  return status(err.status, err.reason, err.message, err.details);
}

function status(code: number, reason: string, message: string, details?: unknown): StatusBody {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    code,
    ...(details !== undefined ? { details } : {}),
  };
}
