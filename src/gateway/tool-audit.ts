// Audit lines for the objects a tool request touches one by one (each document of an apply, each
// pod a drain evicts): the same pino line as the audit plugin writes per request
// (`log.info({audit: record}, 'audit')`), one per object, never a body. The request's own line
// still comes from the audit plugin.
import type { FastifyRequest } from 'fastify';

export interface ObjectAudit {
  cluster: string;
  verb: string;
  resource: string;
  namespace?: string;
  name: string;
  /** The cluster's status for this object (or the refusal's). */
  status: number;
  dryRun?: boolean;
}

export function auditObject(request: FastifyRequest, entry: ObjectAudit): void {
  const principal = request.principal;
  const record = {
    who: principal?.name ?? 'anonymous',
    whoKind: principal?.kind ?? 'anonymous',
    when: new Date().toISOString(),
    requestId: request.id,
    cluster: entry.cluster,
    verb: entry.verb,
    resource: entry.resource,
    namespace: entry.namespace ?? '',
    name: entry.name,
    result: entry.status < 400 ? 'success' : 'failure',
    status: entry.status,
    ...(entry.dryRun ? { dryRun: true } : {}),
  };
  request.log.info({ audit: record }, 'audit');
}
