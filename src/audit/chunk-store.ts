// Where the audit trail lives: AuditChunk objects (crds/auditchunks.kiteline.io.yaml) in kiteline's
// install namespace on the host cluster. Each replica creates its own chunks (never updates one:
// no conflicts, no coordination between replicas), every replica watches all of them, and the
// leader deletes the expired ones. A chunk is capped by record count and by bytes so it stays far
// below the API server's object size limit (1.5 MiB in etcd).
import { randomBytes } from 'node:crypto';
import type { KubernetesObject, V1ObjectMeta } from '@kubernetes/client-node';
import * as k8s from '@kubernetes/client-node';
import type { Logger } from '../log.js';
import { customResourceSource, WatchedCache } from '../host/informer.js';
import { isAlreadyExists, isNotFound } from '../host/host-errors.js';
import { hostApiClient } from '../host/kube.js';
import { API_VERSION, GROUP, MANAGED_BY, MANAGED_BY_LABEL, VERSION } from '../host/resources.js';
import type { AuditRecord } from './record.js';

export const AUDIT_CHUNK_PLURAL = 'auditchunks';
/** Serialized records per chunk at most (the API server takes up to 3 MiB, etcd 1.5 MiB). */
export const MAX_CHUNK_BYTES = 512 * 1024;
/** Label naming the replica that wrote a chunk. */
export const REPLICA_LABEL = 'kiteline.io/audit-replica';

export interface AuditChunkResource extends KubernetesObject {
  metadata: V1ObjectMeta & { name: string };
  spec: {
    replica: string;
    count: number;
    /** Time of the oldest and newest record in the chunk. */
    oldest: string;
    newest: string;
    /** Records of callers that did not authenticate (their own retention: trail.ts). */
    unauthenticated?: boolean;
    records: AuditRecord[];
  };
}

/** A label value (63 characters of [A-Za-z0-9._-], alphanumeric at both ends) naming a replica. */
function labelValue(value: string): string {
  return (
    value
      .replace(/[^A-Za-z0-9._-]/g, '-')
      .slice(0, 63)
      .replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '') || 'replica'
  );
}

/**
 * Splits records (in arrival order) into chunk-sized batches: at most maxRecords each and at most
 * MAX_CHUNK_BYTES of JSON (a record's fields are capped, so one record always fits).
 */
export function splitIntoChunks(
  records: readonly AuditRecord[],
  maxRecords: number,
  maxBytes = MAX_CHUNK_BYTES,
): AuditRecord[][] {
  const batches: AuditRecord[][] = [];
  let batch: AuditRecord[] = [];
  let bytes = 0;
  for (const record of records) {
    const size = Buffer.byteLength(JSON.stringify(record)) + 1;
    if (batch.length > 0 && (batch.length >= maxRecords || bytes + size > maxBytes)) {
      batches.push(batch);
      batch = [];
      bytes = 0;
    }
    batch.push(record);
    bytes += size;
  }
  if (batch.length > 0) batches.push(batch);
  return batches;
}

export class AuditChunkStore {
  readonly cache: WatchedCache<AuditChunkResource>;
  private readonly api: k8s.CustomObjectsApi;
  /** This process's part of chunk names: random, so a restarted replica never reuses a name. */
  private readonly writerId = randomBytes(4).toString('hex');
  private sequence = 0;

  constructor(
    kc: k8s.KubeConfig,
    readonly namespace: string,
    readonly replica: string,
    log: Logger,
  ) {
    this.api = hostApiClient(kc, k8s.CustomObjectsApi, log);
    this.cache = new WatchedCache(kc, customResourceSource<AuditChunkResource>(kc, namespace, AUDIT_CHUNK_PLURAL), log);
  }

  private get target() {
    return { group: GROUP, version: VERSION, namespace: this.namespace, plural: AUDIT_CHUNK_PLURAL };
  }

  /** The name of the next chunk: `audit-<time>-<writer>-<sequence>`, sortable by time of writing. */
  nextName(now = Date.now()): string {
    return `audit-${now.toString(36).padStart(9, '0')}-${this.writerId}-${(this.sequence++).toString(36)}`;
  }

  /** The chunk object for records (not yet written); the name is fixed so a retried write is idempotent. */
  chunk(name: string, records: AuditRecord[], unauthenticated = false): AuditChunkResource {
    let oldest = records[0].time;
    let newest = oldest;
    for (const r of records) {
      if (r.time < oldest) oldest = r.time;
      if (r.time > newest) newest = r.time;
    }
    return {
      apiVersion: API_VERSION,
      kind: 'AuditChunk',
      metadata: {
        name,
        namespace: this.namespace,
        labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [REPLICA_LABEL]: labelValue(this.replica) },
      },
      spec: {
        replica: this.replica,
        count: records.length,
        oldest,
        newest,
        ...(unauthenticated ? { unauthenticated } : {}),
        records,
      },
    };
  }

  /** Creates a chunk; a 409 means an earlier attempt of this very write got through. */
  async write(chunk: AuditChunkResource): Promise<void> {
    try {
      await this.api.createNamespacedCustomObject({ ...this.target, body: chunk });
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
    }
  }

  /** Deletes a chunk (already gone is fine). */
  async delete(name: string): Promise<void> {
    try {
      await this.api.deleteNamespacedCustomObject({ ...this.target, name });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  start(): Promise<void> {
    return this.cache.start();
  }

  stop(): Promise<void> {
    return this.cache.stop();
  }
}
