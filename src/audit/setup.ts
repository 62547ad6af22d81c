// Assembles the audit service of a replica from the configuration: the chunk store in the install
// namespace, the trail (pruning while this replica holds the leader lease), the optional webhook,
// the optional Events of admin writes.
// server.ts starts the trail once the host caches are synced and closes it after the last request.
import type * as k8s from '@kubernetes/client-node';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import { AuditService, type OperatorDirectory } from './audit-service.js';
import type { HostStore } from '../host/store.js';
import { AuditChunkStore } from './chunk-store.js';
import { AuditEventWriter } from './events.js';
import { AuditTrail } from './trail.js';
import { AuditWebhook } from './webhook.js';

export function buildAuditService(
  kc: k8s.KubeConfig,
  host: HostStore,
  config: Pick<Config, 'namespace' | 'replicaId' | 'auditTrail' | 'auditUnauthenticatedPerMinute' | 'auditEvents'>,
  operators: OperatorDirectory,
  isLeader: () => boolean,
  log: Logger,
): AuditService {
  const settings = config.auditTrail;
  const events = config.auditEvents ? new AuditEventWriter(host, log) : undefined;
  let trail: AuditTrail | undefined;
  if (settings) {
    const store = new AuditChunkStore(kc, config.namespace, config.replicaId, log);
    const webhook = settings.webhookUrl ? new AuditWebhook(settings.webhookUrl, settings.webhookCa, log) : undefined;
    trail = new AuditTrail(store, settings, isLeader, log, webhook);
  }
  return new AuditService(log, trail, operators, config.auditUnauthenticatedPerMinute, events);
}
