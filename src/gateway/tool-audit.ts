// Audit records for the objects a tool request touches one by one (each document of an apply, each
// pod a drain evicts): one record per object through the one audit entry point
// (services.audit.record: the `audit` log line and the durable trail), never a body. The request's
// own record still comes from the audit plugin.
import type { FastifyRequest } from 'fastify';
import type { AuditEntry } from '../audit/record.js';

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
  const record: AuditEntry = {
    who: principal?.name ?? 'anonymous',
    whoKind: principal?.kind ?? 'anonymous',
    ...(principal ? { whoId: principal.id } : {}),
    when: new Date().toISOString(),
    requestId: request.id,
    cluster: entry.cluster,
    verb: entry.verb,
    resource: entry.resource,
    namespace: entry.namespace ?? '',
    name: entry.name,
    result: entry.status < 400 ? 'success' : 'failure',
    status: entry.status,
    clientAddress: request.ip,
    path: request.url.split('?')[0],
    ...(entry.dryRun ? { dryRun: true } : {}),
  };
  request.server.services.audit.record(record, request.log);
}
