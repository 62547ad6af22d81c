// Audit of resource writes (CONTRACT section 8): one log line per create, update, patch or delete
// through the gateway with who, cluster, verb, resource, namespace, name and the result. Bodies
// (and so Secret contents) are never logged.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Verb } from '../auth/principal.js';

export interface ResourceAuditEntry {
  verb: Verb;
  cluster: string;
  resource: string;
  namespace: string | undefined;
  name: string | undefined;
  dryRun: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by a resource write; logged as the audit line when the response is done. */
    resourceAudit: ResourceAuditEntry | undefined;
  }
}

const WRITE_VERBS = new Set<Verb>(['create', 'update', 'patch', 'delete']);

export function isWriteVerb(verb: Verb): boolean {
  return WRITE_VERBS.has(verb);
}

/** onResponse hook: writes the audit line of a resource write. */
export async function logResourceAudit(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const entry = request.resourceAudit;
  if (!entry) return;
  const status = reply.statusCode;
  request.log.info(
    {
      audit: {
        who: request.principal?.name,
        whoKind: request.principal?.kind,
        ...entry,
        result: status < 400 ? 'success' : 'failure',
        status,
      },
    },
    'audit',
  );
}
