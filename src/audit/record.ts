// The audit record, defined once: what callers hand to the audit service (AuditEntry, the same
// fields as the `audit` log line) and what the durable trail stores and queries (AuditRecord).
// An entry names an action: who, where, what, how it ended. Never a request body, a Secret value,
// a password, a token or a byte of a stream: there is no field that could hold one.

export type OperatorKind = 'user' | 'apikey' | 'anonymous';

/**
 * One audited action as its producer knows it: the `audit` log line. Admin and resource writes
 * (plugins/audit.ts), logins, proxy sessions (proxy/session.ts), terminal sessions and file writes
 * all describe themselves with these fields.
 */
export interface AuditEntry {
  /** Username, `apikey:<key name>`, or `anonymous`. */
  who: string;
  whoKind: string;
  /** The User's or APIKey's id when the producer knows it (else looked up by name). */
  whoId?: number;
  /** When the request arrived (ISO 8601); sessions say start instead. */
  when?: string;
  start?: string;
  /** When a long-running session ended (ISO 8601). */
  end?: string;
  requestId: string;
  cluster: string;
  verb: string;
  resource: string;
  namespace: string;
  name: string;
  /** Admin routes with `:id`: the id from the path. */
  id?: string;
  /** Role assign/unassign: the user. */
  subject?: string;
  result: 'success' | 'failure';
  status: number;
  dryRun?: boolean;
  /**
   * Sessions through the kubectl proxy: the stream protocol the cluster agreed to, as its 101 answer
   * names it, e.g. `websocket v5.channel.k8s.io` (kubectl 1.31+ exec) or `SPDY/3.1 portforward.k8s.io`.
   */
  protocol?: string;
  /** Bytes from the client to the cluster, and back (sessions). */
  bytesIn?: number;
  bytesOut?: number;
  /** The client's address (the socket peer, or X-Forwarded-For from a trusted proxy). */
  clientAddress?: string;
  /** The request path, without its query string. */
  path?: string;
  /** MCP tool calls: the call's arguments as JSON, without secret values (src/mcp/). */
  arguments?: string;
  /** Recorded sessions: the recording's id (GET /api/v1/admin/sessions/<id>, src/recording/). */
  recording?: string;
}

/** Who acted, as a principal names itself (auth/principal.ts; structural, so audit/ needs no auth/). */
export interface Actor {
  name: string;
  kind: string;
  id: number;
}

/** The request an entry is about, as Fastify and the upgrade handlers know it. */
export interface AuditedRequest {
  id: string;
  ip: string;
  url: string;
}

/**
 * The who and where of every entry, built in this one place: the actor (or `anonymous`; a sign-in
 * names the user it tried as `actor` before there is a principal), the request id, the client's
 * address and the path without its query.
 */
export function entryOrigin(
  principal: Actor | undefined,
  request: AuditedRequest,
  actor?: string,
): Pick<AuditEntry, 'who' | 'whoKind' | 'whoId'> & { requestId: string; clientAddress: string; path: string } {
  return {
    who: principal?.name ?? actor ?? 'anonymous',
    whoKind: principal?.kind ?? (actor ? 'user' : 'anonymous'),
    ...(principal ? { whoId: principal.id } : {}),
    requestId: request.id,
    clientAddress: request.ip,
    path: request.url.split('?')[0],
  };
}

/** One stored audit record (in an AuditChunk): time, operator, the action and how it ended. */
export interface AuditRecord {
  /** When the action began (ISO 8601 UTC). */
  time: string;
  operator: { id: number; name: string; kind: OperatorKind };
  cluster: string;
  operation: string;
  resourceType: string;
  namespace: string;
  name: string;
  result: 'success' | 'failure';
  status: number;
  requestId: string;
  clientAddress: string;
  path?: string;
  objectId?: string;
  subject?: string;
  dryRun?: boolean;
  end?: string;
  bytesIn?: number;
  bytesOut?: number;
  arguments?: string;
  recording?: string;
}

/** The longest string copied into a record; anything longer is cut. */
export const MAX_RECORD_FIELD = 253;
const MAX_PATH = 512;
const MAX_ARGUMENTS = 2048;

function text(value: unknown, max = MAX_RECORD_FIELD): string {
  return typeof value === 'string' ? value.slice(0, max) : '';
}

function operatorKind(kind: string): OperatorKind {
  return kind === 'user' || kind === 'apikey' ? kind : 'anonymous';
}

function isoTime(value: string | undefined, fallback: Date): string {
  const parsed = value === undefined ? NaN : Date.parse(value);
  return (Number.isNaN(parsed) ? fallback : new Date(parsed)).toISOString();
}

/**
 * The stored form of an entry. `operatorId` finds the id of a named operator when the entry has
 * none (0 when unknown: anonymous callers, deleted users). Unknown fields of the entry are dropped.
 */
export function toAuditRecord(
  entry: AuditEntry,
  operatorId: (kind: OperatorKind, name: string) => number,
  now = new Date(),
): AuditRecord {
  const kind = operatorKind(entry.whoKind);
  const name = text(entry.who) || 'anonymous';
  const id = kind === 'anonymous' ? 0 : (entry.whoId ?? operatorId(kind, name));
  const record: AuditRecord = {
    time: isoTime(entry.when ?? entry.start, now),
    operator: { id: Number.isSafeInteger(id) && id >= 0 ? id : 0, name, kind },
    cluster: text(entry.cluster),
    operation: text(entry.verb),
    resourceType: text(entry.resource),
    namespace: text(entry.namespace),
    name: text(entry.name),
    result: entry.result === 'success' ? 'success' : 'failure',
    status: Number.isInteger(entry.status) ? entry.status : 0,
    requestId: text(entry.requestId, 64),
    clientAddress: text(entry.clientAddress, 64),
  };
  if (entry.path) record.path = text(entry.path.split('?')[0], MAX_PATH);
  if (entry.id) record.objectId = text(entry.id);
  if (entry.subject) record.subject = text(entry.subject);
  if (entry.dryRun) record.dryRun = true;
  if (entry.end) record.end = isoTime(entry.end, now);
  if (typeof entry.bytesIn === 'number') record.bytesIn = entry.bytesIn;
  if (typeof entry.bytesOut === 'number') record.bytesOut = entry.bytesOut;
  if (entry.arguments) record.arguments = text(entry.arguments, MAX_ARGUMENTS);
  if (entry.recording) record.recording = text(entry.recording);
  return record;
}

/** Newest first; ties by request id so every replica orders alike. */
export function newestFirst(a: AuditRecord, b: AuditRecord): number {
  if (a.time !== b.time) return a.time < b.time ? 1 : -1;
  return a.requestId === b.requestId ? 0 : a.requestId < b.requestId ? 1 : -1;
}
