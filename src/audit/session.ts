// One long-running session's audit: a kubectl exec, attach or port-forward through the proxy, a pod
// or node terminal. The handle is opened when the request arrives (a refusal until told
// otherwise), named as the request is resolved (cluster, verb, resource, namespace, name), counts
// the bytes each way, and ends once, refused or done, with one record through the audit service.
// Every session producer uses it, so who/where/when/bytes are built in one place, and whatever
// else follows a session (a recorder of its stream) hangs off this handle.
import type { AuditLineLogger } from './audit-service.js';
import { entryOrigin, type Actor, type AuditEntry, type AuditedRequest } from './record.js';

/**
 * The entry of a long-running session: it has a start, an end and byte counts.
 */
export type SessionEntry = AuditEntry & Required<Pick<AuditEntry, 'start' | 'end' | 'bytesIn' | 'bytesOut'>>;

/** What a session learns about itself as it is resolved. */
export type SessionTarget = Partial<
  Pick<AuditEntry, 'cluster' | 'verb' | 'resource' | 'namespace' | 'name' | 'subject' | 'protocol' | 'recording'>
>;

/** How a session ended: the HTTP status it answered (101 for a session that ran) and its result. */
export interface SessionEnd {
  status: number;
  result: 'success' | 'failure';
  bytesIn?: number;
  bytesOut?: number;
}

/** Where the record goes: the audit service (audit-service.ts). */
export interface SessionSink {
  record(entry: AuditEntry, log?: AuditLineLogger): void;
}

export class AuditSession<Extra extends object = object> {
  readonly entry: SessionEntry & Partial<Extra>;
  private ended = false;

  constructor(
    private readonly sink: SessionSink,
    private readonly log: AuditLineLogger,
    principal: Actor | undefined,
    request: AuditedRequest,
    target: SessionTarget = {},
  ) {
    this.entry = {
      cluster: '',
      verb: '',
      resource: '',
      namespace: '',
      name: '',
      result: 'failure',
      status: 0,
      end: '',
      bytesIn: 0,
      bytesOut: 0,
      ...entryOrigin(principal, request),
      ...target,
      start: new Date().toISOString(),
    } as SessionEntry & Partial<Extra>;
  }

  /** The caller, once it is known (an upgrade authenticates after its session opened). */
  identify(principal: Actor, request: AuditedRequest): void {
    Object.assign(this.entry, entryOrigin(principal, request));
  }

  /** What the session is about, or more of it (a terminal's container, a node pod's name). */
  name(target: SessionTarget & Partial<Extra>): void {
    Object.assign(this.entry, target);
  }

  /** Counts bytes from the client to the cluster. */
  countIn(bytes: number): void {
    this.entry.bytesIn += bytes;
  }

  /** Counts bytes from the cluster to the client. */
  countOut(bytes: number): void {
    this.entry.bytesOut += bytes;
  }

  /** Refused before it began: the status of the refusal. */
  refuse(status: number): void {
    this.end({ status, result: 'failure' } as SessionEnd & Partial<Extra>);
  }

  /** Ends the session and writes its one record; later calls do nothing. */
  end(outcome: SessionEnd & Partial<Extra>): void {
    if (this.ended) return;
    this.ended = true;
    Object.assign(this.entry, outcome, { end: new Date().toISOString() });
    this.sink.record(this.entry, this.log);
  }

  /** Ends the session without a record (an anonymous refusal names no action). */
  drop(): void {
    this.ended = true;
  }
}
