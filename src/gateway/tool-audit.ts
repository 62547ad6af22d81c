// Audit records for the objects a tool request touches one by one (each document of an apply, each
// pod a drain evicts): one record per object through the one audit entry point
// (services.audit.record: the `audit` log line and the durable trail), never a body. The request's
// own record still comes from the audit plugin.
import type { FastifyRequest } from 'fastify';
import { entryOrigin, type AuditEntry } from '../audit/record.js';

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
  const record: AuditEntry = {
    ...entryOrigin(request.principal, request),
    when: new Date().toISOString(),
    cluster: entry.cluster,
    verb: entry.verb,
    resource: entry.resource,
    namespace: entry.namespace ?? '',
    name: entry.name,
    result: entry.status < 400 ? 'success' : 'failure',
    status: entry.status,
    ...(entry.dryRun ? { dryRun: true } : {}),
  };
  request.server.services.audit.record(record, request.log);
}
