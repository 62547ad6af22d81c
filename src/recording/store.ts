// Where recordings live: in kiteline's install namespace on the host cluster, as two kinds
// (crds/sessionrecordings.kiteline.io.yaml, crds/sessionchunks.kiteline.io.yaml).
// - A SessionRecording per session: who, where, what, when, the typed commands and the totals.
//   Small; created when the session starts, patched by the one replica that carries the session
//   at each flush and at the end; every replica watches them (the list and search index).
// - SessionChunks: the cast's events, gzip-compressed, one per flush (at most CHUNK_EVENT_BYTES
//   of event lines before compression, far below the API server's object size limit). Written
//   once, never changed, never watched: read by label when a session is replayed or its output
//   searched. Each is owned by its recording (ownerReferences), so deleting a recording lets the
//   garbage collector take its chunks; the pruner deletes them by label too.
import { randomBytes } from 'node:crypto';
import type { KubernetesObject, V1ObjectMeta } from '@kubernetes/client-node';
import * as k8s from '@kubernetes/client-node';
import type { Logger } from '../log.js';
import { customResourceSource, WatchedCache } from '../host/informer.js';
import { isAlreadyExists, isNotFound } from '../host/host-errors.js';
import { hostApiClient } from '../host/kube.js';
import { API_VERSION, GROUP, MANAGED_BY, MANAGED_BY_LABEL, VERSION } from '../host/resources.js';

export const RECORDING_PLURAL = 'sessionrecordings';
export const CHUNK_PLURAL = 'sessionchunks';
/** Label on a chunk naming its recording. */
export const RECORDING_LABEL = 'kiteline.io/recording';
/** Event lines per chunk at most, before compression (gzip and base64 keep a chunk under ~350 KiB). */
export const CHUNK_EVENT_BYTES = 256 * 1024;

/** What kind of session a recording is of. */
export type SessionKind = 'pod-terminal' | 'node-terminal' | 'kubectl-console' | 'exec' | 'attach';

/** What is known of a session when it starts. */
export interface RecordingMeta {
  user: string;
  userKind: string;
  cluster: string;
  kind: SessionKind;
  namespace: string;
  pod: string;
  container: string;
  command: string;
  /** The node of a node terminal. */
  node?: string;
  requestId: string;
  clientAddress: string;
  width: number;
  height: number;
}

/** What the carrying replica adds as the session runs, and when it ends. */
export interface RecordingProgress {
  /** A proxied session's stream protocol, from the cluster's 101 answer. */
  protocol?: string;
  /** The terminal's first size, once the session told it (the cast header's). */
  width?: number;
  height?: number;
  /** Last flush (ISO 8601). */
  updated: string;
  /** Event lines recorded, and their bytes before compression. */
  events: number;
  bytes: number;
  /** Compressed bytes of the chunks written. */
  storedBytes: number;
  chunks: number;
  /** Lines typed (TypedLines), capped: in a progress write only when they changed. */
  input?: string;
  /** Output not recorded: past the per-session limit (truncated) or while the host lagged (dropped). */
  truncated?: boolean;
  droppedBytes?: number;
  end?: string;
  exitCode?: number;
  result?: 'success' | 'failure';
}

/** The progress of a recording that has written nothing yet. */
export function noProgress(): RecordingProgress {
  return { updated: new Date().toISOString(), events: 0, bytes: 0, storedBytes: 0, chunks: 0 };
}

export type RecordingSpec = RecordingMeta & RecordingProgress & { replica: string; start: string };

export interface RecordingResource extends KubernetesObject {
  metadata: V1ObjectMeta & { name: string };
  spec: RecordingSpec;
}

export interface ChunkResource extends KubernetesObject {
  metadata: V1ObjectMeta & { name: string };
  spec: {
    recording: string;
    seq: number;
    events: number;
    /** Bytes of event lines before compression. */
    bytes: number;
    /** The event lines, gzip, base64. */
    data: string;
  };
}

export class RecordingStore {
  readonly cache: WatchedCache<RecordingResource>;
  private readonly api: k8s.CustomObjectsApi;

  constructor(
    kc: k8s.KubeConfig,
    readonly namespace: string,
    log: Logger,
  ) {
    this.api = hostApiClient(kc, k8s.CustomObjectsApi, log);
    this.cache = new WatchedCache(kc, customResourceSource<RecordingResource>(kc, namespace, RECORDING_PLURAL), log);
  }

  private target(plural: string) {
    return { group: GROUP, version: VERSION, namespace: this.namespace, plural };
  }

  /** A new recording's name: `s-<time>-<random>`, sortable by start. */
  static newName(now = Date.now()): string {
    return `s-${now.toString(36).padStart(9, '0')}-${randomBytes(5).toString('hex')}`;
  }

  /** Creates the recording object; its uid owns the chunks. */
  async create(name: string, spec: RecordingSpec): Promise<string> {
    const body: RecordingResource = {
      apiVersion: API_VERSION,
      kind: 'SessionRecording',
      metadata: { name, namespace: this.namespace, labels: { [MANAGED_BY_LABEL]: MANAGED_BY } },
      spec,
    };
    const created = (await this.api.createNamespacedCustomObject({
      ...this.target(RECORDING_PLURAL),
      body,
    })) as RecordingResource;
    return created.metadata.uid ?? '';
  }

  /** Writes the progress (a merge patch: the carrying replica is the recording's only writer). */
  async progress(name: string, progress: RecordingProgress): Promise<void> {
    await this.api.patchNamespacedCustomObject(
      { ...this.target(RECORDING_PLURAL), name, body: { spec: progress } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
  }

  /** Creates a chunk; a 409 means an earlier attempt of this very write got through. */
  async writeChunk(recording: string, uid: string, seq: number, events: number, bytes: number, data: string) {
    const body: ChunkResource = {
      apiVersion: API_VERSION,
      kind: 'SessionChunk',
      metadata: {
        name: `${recording}-${seq.toString().padStart(6, '0')}`,
        namespace: this.namespace,
        labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [RECORDING_LABEL]: recording },
        ownerReferences: [{ apiVersion: API_VERSION, kind: 'SessionRecording', name: recording, uid }],
      },
      spec: { recording, seq, events, bytes, data },
    };
    try {
      await this.api.createNamespacedCustomObject({ ...this.target(CHUNK_PLURAL), body });
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
    }
  }

  /** A recording's chunks in order (by name: the sequence number is zero-padded), a page of 8 at a time. */
  async *chunks(recording: string): AsyncGenerator<ChunkResource> {
    let token: string | undefined;
    do {
      const page = (await this.api.listNamespacedCustomObject({
        ...this.target(CHUNK_PLURAL),
        labelSelector: `${RECORDING_LABEL}=${recording}`,
        limit: 8,
        ...(token ? { _continue: token } : {}),
      })) as { items: ChunkResource[]; metadata?: { _continue?: string; continue?: string } };
      yield* page.items.sort((a, b) => a.spec.seq - b.spec.seq);
      token = page.metadata?._continue ?? page.metadata?.continue;
    } while (token);
  }

  /** Deletes a recording and its chunks (already gone is fine). */
  async delete(recording: string): Promise<void> {
    try {
      await this.api.deleteCollectionNamespacedCustomObject({
        ...this.target(CHUNK_PLURAL),
        labelSelector: `${RECORDING_LABEL}=${recording}`,
      });
      await this.api.deleteNamespacedCustomObject({ ...this.target(RECORDING_PLURAL), name: recording });
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
