// The one way to audit an action (services.audit.record): the `audit` log line, as before, and the
// same action as a record of the durable trail (when it is on). Every producer calls it: the
// write hook (gateway/plugins/audit.ts), proxy sessions (proxy/session.ts), terminal sessions and
// file writes.
import type { Logger } from '../log.js';
import { resourceId } from '../host/resources.js';
import type { KubernetesObject } from '@kubernetes/client-node';
import { toAuditRecord, type AuditEntry, type OperatorKind } from './record.js';
import type { AuditTrail } from './trail.js';

/** Finds the id of a named operator: the user and API key stores (host/identity-stores.ts). */
export interface OperatorDirectory {
  users: { byUsername(username: string): KubernetesObject | undefined };
  apiKeys: { index: { byKey(name: string): KubernetesObject | undefined } };
}

/** Where the line goes: the service's logger, or a request's (so the line carries its reqId). */
export interface AuditLineLogger {
  info(obj: object, msg: string): void;
}

/** The API key's name of an `apikey:<name>` operator. */
const API_KEY_PREFIX = 'apikey:';

export class AuditService {
  constructor(
    private readonly log: Logger,
    /** undefined when the durable trail is off (KITELINE_AUDIT_TRAIL=false): the log line only. */
    readonly trail: AuditTrail | undefined,
    private readonly operators: OperatorDirectory,
  ) {}

  /**
   * Logs the entry (with the request's logger when given, so the line has its reqId) and stores it.
   * The log line keeps its documented fields: the operator's id, the client address and the path
   * are in the request's own log line (same reqId) and in the stored record.
   */
  record(entry: AuditEntry, log: AuditLineLogger = this.log): void {
    const { whoId: _whoId, clientAddress: _clientAddress, path: _path, ...line } = entry;
    log.info({ audit: line }, 'audit');
    this.trail?.add(toAuditRecord(entry, (kind, name) => this.operatorId(kind, name)));
  }

  private operatorId(kind: OperatorKind, name: string): number {
    const found =
      kind === 'user'
        ? this.operators.users.byUsername(name)
        : kind === 'apikey'
          ? this.operators.apiKeys.index.byKey(
              name.startsWith(API_KEY_PREFIX) ? name.slice(API_KEY_PREFIX.length) : name,
            )
          : undefined;
    return (found && resourceId(found)) ?? 0;
  }
}
