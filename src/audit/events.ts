// Admin writes as core/v1 Events in the install namespace (KITELINE_AUDIT_EVENTS=true), so
// `kubectl get events -n <namespace>` shows who changed users, roles, API keys and clusters.
// Best effort: a failed Event is a warning in the log, never a failed request. One of the audit
// service's outputs (audit-service.ts), like the log line and the trail.
import type { HostStore } from '../host/store.js';
import { describeApiError } from '../host/host-errors.js';
import type { Logger } from '../log.js';
import type { AuditEntry } from './record.js';

/** Annotation holding the whole audit record as JSON. */
export const AUDIT_ANNOTATION = 'kiteline.io/audit';

export class AuditEventWriter {
  constructor(
    private readonly host: HostStore,
    private readonly log: Logger,
  ) {}

  record(record: AuditEntry): void {
    const namespace = this.host.namespace;
    const target = record.name || (record.id ? `#${record.id}` : '');
    const now = new Date();
    const body = {
      metadata: {
        generateName: 'kiteline-audit-',
        namespace,
        labels: { 'app.kubernetes.io/part-of': 'kiteline', 'kiteline.io/audit': 'true' },
        annotations: { [AUDIT_ANNOTATION]: JSON.stringify(record) },
      },
      involvedObject: { apiVersion: 'v1', kind: 'Namespace', name: namespace, namespace },
      reason: record.result === 'success' ? 'AdminWrite' : 'AdminWriteFailed',
      message:
        `${record.who} ${record.verb} ${record.resource}${target ? ` ${target}` : ''}: ` +
        `${record.result} (${record.status}, request ${record.requestId})`,
      type: record.result === 'success' ? 'Normal' : 'Warning',
      source: { component: 'kiteline' },
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    };
    this.host.core.createNamespacedEvent({ namespace, body }).catch((err: unknown) => {
      this.log.warn({ requestId: record.requestId, error: describeApiError(err) }, 'could not write the audit Event');
    });
  }
}
