// Resource writes and the audit log (docs/operations.md): the gateway's audit plugin
// (src/gateway/plugins/audit.ts) writes one line per write; a resource route tells it, through
// request.auditDetail, the cluster, resource, namespace and name it resolved and whether it was a
// dry run. Bodies (and so Secret contents) are never logged.
import type { Verb } from '../auth/principal.js';

const WRITE_VERBS = new Set<Verb>(['create', 'update', 'patch', 'delete']);

export function isWriteVerb(verb: Verb): boolean {
  return WRITE_VERBS.has(verb);
}
