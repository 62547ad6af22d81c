// The one way to audit an action (services.audit.record), and the owner of every output: the
// `audit` log line, the same action as a record of the durable trail (when it is on; the trail
// sends it on to the webhook), and for admin writes an Event in the install namespace (when
// KITELINE_AUDIT_EVENTS is on: events.ts). Every producer calls it: the
// write hook (gateway/plugins/audit.ts), proxy sessions (proxy/session.ts), terminal sessions and
// file writes.
// Unauthenticated actions (a 401 write, a failed login, the public logout: anyone can send a
// million) are recorded one by one only up to a budget per minute and replica; the rest are
// counted and written as one summary record per minute, and the trail keeps them apart from the
// authenticated records with their own retention (trail.ts), so a flood can neither fill the host
// nor push a real record out.
import type { Logger } from '../log.js';
import { resourceId } from '../host/resources.js';
import type { KubernetesObject } from '@kubernetes/client-node';
import { toAuditRecord, type AuditEntry, type OperatorKind } from './record.js';
import type { AuditEventWriter } from './events.js';
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

/**
 * An entry of a caller that did not authenticate: no operator id and not a successful sign-in (a
 * successful login names its user but has no principal yet).
 */
export function isUnauthenticated(entry: AuditEntry): boolean {
  return entry.whoId === undefined && (entry.result !== 'success' || entry.whoKind === 'anonymous');
}

const MINUTE_MS = 60_000;

/** Admits the first `perMinute` unauthenticated entries of each minute and counts the rest. */
export class UnauthenticatedBudget {
  private windowStart: number;
  private admitted = 0;
  private suppressed = 0;
  private readonly addresses = new Set<string>();

  constructor(
    private readonly perMinute: number,
    private readonly now: () => number = Date.now,
  ) {
    this.windowStart = now();
  }

  /** Whether this entry is recorded one by one (the caller rolls a window that has passed first). */
  admit(entry: AuditEntry): boolean {
    if (this.admitted < this.perMinute) {
      this.admitted++;
      return true;
    }
    this.suppressed++;
    if (this.addresses.size < 20 && entry.clientAddress) this.addresses.add(entry.clientAddress);
    return false;
  }

  /**
   * Closes the current window when a minute has passed (or at once, `force`): the summary entry of
   * what it did not record one by one (undefined when nothing was left out).
   */
  roll(force = false): AuditEntry | undefined {
    const now = this.now();
    if (!force && now - this.windowStart < MINUTE_MS) return undefined;
    const { suppressed, windowStart } = this;
    const from = [...this.addresses].join(', ') || 'unknown';
    this.windowStart = now;
    this.admitted = 0;
    this.suppressed = 0;
    this.addresses.clear();
    if (suppressed === 0) return undefined;
    return {
      who: 'anonymous',
      whoKind: 'anonymous',
      when: new Date(windowStart).toISOString(),
      end: new Date(now).toISOString(),
      requestId: `unauthenticated-${windowStart}`,
      cluster: '',
      verb: 'unauthenticated-requests',
      resource: '',
      namespace: '',
      name: `${suppressed} more`,
      subject: `${suppressed} unauthenticated requests not recorded one by one; from ${from}`,
      result: 'failure',
      status: 0,
    };
  }
}

export class AuditService {
  private readonly budget: UnauthenticatedBudget;
  private readonly roller: NodeJS.Timeout;

  constructor(
    private readonly log: Logger,
    /** undefined when the durable trail is off (KITELINE_AUDIT_TRAIL=false): the log line only. */
    readonly trail: AuditTrail | undefined,
    private readonly operators: OperatorDirectory,
    unauthenticatedPerMinute = 60,
    /** Admin writes as Events (KITELINE_AUDIT_EVENTS=true); undefined: off. */
    private readonly events?: AuditEventWriter,
  ) {
    this.budget = new UnauthenticatedBudget(unauthenticatedPerMinute);
    this.roller = setInterval(() => this.roll(), MINUTE_MS / 6);
    this.roller.unref();
  }

  /** Writes the summary of a minute that has passed, if it left entries out. */
  private roll(): void {
    const summary = this.budget.roll();
    if (summary) this.write(summary, this.log, true);
  }

  /**
   * Logs the entry (with the request's logger when given, so the line has its reqId) and stores it.
   * The log line keeps its documented fields: the operator's id, the client address and the path
   * are in the request's own log line (same reqId) and in the stored record.
   */
  record(entry: AuditEntry, log: AuditLineLogger = this.log, adminWrite = false): void {
    const unauthenticated = isUnauthenticated(entry);
    if (unauthenticated) {
      this.roll();
      if (!this.budget.admit(entry)) return;
    }
    this.write(entry, log, unauthenticated);
    if (adminWrite) this.events?.record(entry);
  }

  /** Stops the summary timer and writes the summary of the minute under way (shutdown). */
  close(): void {
    clearInterval(this.roller);
    const summary = this.budget.roll(true);
    if (summary) this.write(summary, this.log, true);
  }

  private write(entry: AuditEntry, log: AuditLineLogger, unauthenticated: boolean): void {
    const { whoId: _whoId, clientAddress: _clientAddress, path: _path, ...line } = entry;
    log.info({ audit: line }, 'audit');
    this.trail?.add(
      toAuditRecord(entry, (kind, name) => this.operatorId(kind, name)),
      unauthenticated,
    );
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
