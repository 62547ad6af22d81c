// The optional export of audit records to a webhook in the Kubernetes audit webhook format: POSTs
// of `audit.k8s.io/v1` EventLists, as the API server's own --audit-webhook-config-file backend
// sends them, so a pipeline that takes the API server's audit events takes kiteline's too. Each
// replica sends the records it made, in batches, from a bounded queue: a webhook that is down
// gets retried with backoff and never slows a request; when the queue is full the oldest records
// are dropped (they are still in the audit trail and the log) and a warning says how many.
import { Agent, request } from 'undici';
import type { Logger } from '../log.js';
import type { AuditRecord } from './record.js';

/** Records per EventList at most. */
const BATCH = 500;
/** Records waiting at most; older ones are dropped beyond this. */
const MAX_QUEUED = 20_000;
const TIMEOUT_MS = 10_000;
const MAX_BACKOFF_MS = 30_000;

/** RFC 3339 with microseconds, the format of the audit API's MicroTime fields. */
function microTime(iso: string): string {
  return iso.replace(/\.(\d{3})Z$/, '.$1000Z');
}

/** `widgets.example.com` is resource `widgets` of group `example.com`; `pods` is core. */
function objectRef(record: AuditRecord): Record<string, string> {
  const dot = record.resourceType.indexOf('.');
  const ref: Record<string, string> =
    dot > 0
      ? { resource: record.resourceType.slice(0, dot), apiGroup: record.resourceType.slice(dot + 1) }
      : { resource: record.resourceType };
  if (record.namespace) ref.namespace = record.namespace;
  if (record.name) ref.name = record.name;
  return ref;
}

/** One record as an audit.k8s.io/v1 Event (level Metadata: never a request or response body). */
export function auditEvent(record: AuditRecord): object {
  const annotations: Record<string, string> = {
    'kiteline.io/result': record.result,
    'kiteline.io/operator-kind': record.operator.kind,
  };
  if (record.cluster) annotations['kiteline.io/cluster'] = record.cluster;
  if (record.subject) annotations['kiteline.io/subject'] = record.subject;
  if (record.objectId) annotations['kiteline.io/object-id'] = record.objectId;
  return {
    kind: 'Event',
    apiVersion: 'audit.k8s.io/v1',
    level: 'Metadata',
    auditID: record.requestId,
    stage: 'ResponseComplete',
    requestURI: record.path ?? '',
    verb: record.operation,
    user: {
      username: record.operator.name,
      ...(record.operator.kind === 'anonymous' ? {} : { uid: `${record.operator.kind}:${record.operator.id}` }),
    },
    sourceIPs: record.clientAddress ? [record.clientAddress] : [],
    objectRef: objectRef(record),
    responseStatus: { metadata: {}, code: record.status, status: record.result === 'success' ? 'Success' : 'Failure' },
    requestReceivedTimestamp: microTime(record.time),
    stageTimestamp: microTime(record.end ?? record.time),
    annotations,
  };
}

export function auditEventList(records: readonly AuditRecord[]): object {
  return { kind: 'EventList', apiVersion: 'audit.k8s.io/v1', metadata: {}, items: records.map(auditEvent) };
}

export class AuditWebhook {
  private queue: AuditRecord[] = [];
  private sending: Promise<void> | undefined;
  private failures = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly dispatcher: Agent;
  private readonly log: Logger;

  constructor(
    private readonly url: string,
    ca: string | undefined,
    log: Logger,
  ) {
    this.dispatcher = new Agent({ connect: ca ? { ca } : {}, headersTimeout: TIMEOUT_MS, bodyTimeout: TIMEOUT_MS });
    // The URL may carry a token in its query: only the host is ever logged.
    this.log = log.child({ component: 'audit-webhook', webhookHost: new URL(url).host });
  }

  /** Queues records; they are sent right away unless a failed send is waiting for its retry. */
  send(records: readonly AuditRecord[]): void {
    if (this.closed || records.length === 0) return;
    this.queue.push(...records);
    if (this.queue.length > MAX_QUEUED) {
      const dropped = this.queue.length - MAX_QUEUED;
      this.queue.splice(0, dropped);
      this.log.warn({ dropped }, 'audit webhook queue full: oldest records not exported');
    }
    if (!this.retryTimer) this.kick();
  }

  private kick(): void {
    this.sending ??= this.drain().finally(() => (this.sending = undefined));
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue.slice(0, BATCH);
      try {
        await this.post(batch);
      } catch (err) {
        this.failures++;
        if (this.closed) return;
        const delay = Math.min(MAX_BACKOFF_MS, 500 * 2 ** Math.min(this.failures - 1, 6));
        this.log.warn(
          { err: (err as Error).message, retryInMs: delay, queued: this.queue.length },
          'audit webhook failed; retrying',
        );
        this.retryTimer = setTimeout(() => {
          this.retryTimer = undefined;
          this.kick();
        }, delay);
        this.retryTimer.unref();
        return;
      }
      this.failures = 0;
      this.queue.splice(0, batch.length);
    }
  }

  private async post(batch: readonly AuditRecord[]): Promise<void> {
    const res = await request(this.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(auditEventList(batch)),
      dispatcher: this.dispatcher,
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    await res.body.dump();
    if (res.statusCode >= 300) throw new Error(`the webhook answered HTTP ${res.statusCode}`);
  }

  /** Sends what is queued once more (no retries), then stops. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    await this.sending;
    try {
      while (this.queue.length > 0) {
        await this.post(this.queue.slice(0, BATCH));
        this.queue.splice(0, BATCH);
      }
    } catch (err) {
      this.log.warn(
        { err: (err as Error).message, lost: this.queue.length },
        'audit webhook unreachable at shutdown; records not exported',
      );
    }
    await this.dispatcher.close();
  }
}
