// A supervised, watch-backed cache of one kind of object in the host cluster.
// client-node's ListWatch re-lists on 410 and re-watches when the server closes a watch, but stops
// for good on any other error; this wrapper restarts it with backoff (a fresh list, so anything
// missed while disconnected is seen), and tells when the first list has been loaded.
import { EventEmitter } from 'node:events';
import * as k8s from '@kubernetes/client-node';
import type { Logger } from '../log.js';
import { describeApiError } from './host-errors.js';

export type InformerEvent = 'add' | 'update' | 'delete';

export interface InformerSource<T extends k8s.KubernetesObject> {
  /** A short name for logs, e.g. "users". */
  name: string;
  /** The watch path, e.g. /apis/kiteline.io/v1alpha1/namespaces/ns/users. */
  path: string;
  list: () => Promise<k8s.KubernetesListObject<T>>;
  labelSelector?: string;
  /** The namespace the path watches, if any: the default for get(). */
  namespace?: string;
}

export class WatchedCache<T extends k8s.KubernetesObject> {
  private readonly informer: k8s.Informer<T> & k8s.ObjectCache<T>;
  private readonly events = new EventEmitter();
  private readonly log: Logger;
  private readonly namespace: string | undefined;
  private synced = false;
  private stopped = false;
  /** Failures in a row, for the back-off; a successful connect resets it. */
  private failures = 0;
  /**
   * Every failure ever, never reset: whether a start failed is told by this count, not by
   * `failures`, which the start's own successful connect may have reset meanwhile (a restart after
   * one failure then never counted as synced: a CRD whose storage was still initializing answered
   * the first watch 429, the retry connected, and the cache waited for ever).
   */
  private errorCount = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  private firstSync: Promise<void>;
  private resolveFirstSync!: () => void;

  constructor(kc: k8s.KubeConfig, source: InformerSource<T>, log: Logger) {
    this.log = log.child({ informer: source.name });
    this.namespace = source.namespace;
    this.informer = k8s.makeInformer(kc, source.path, source.list, source.labelSelector);
    this.firstSync = new Promise((resolve) => (this.resolveFirstSync = resolve));
    this.events.setMaxListeners(0); // one per write awaiting read-your-writes
    for (const verb of ['add', 'update', 'delete'] as const) {
      this.informer.on(verb, (obj: T) => this.events.emit(verb, obj));
    }
    this.informer.on('connect', () => {
      this.failures = 0;
    });
    this.informer.on('error', (err: unknown) => this.onError(err));
  }

  /** Starts the list-watch; resolves once the first list is in the cache. */
  async start(): Promise<void> {
    void this.run();
    await this.firstSync;
  }

  private async run(): Promise<void> {
    if (this.stopped) return;
    const errorsBefore = this.errorCount;
    let threw = false;
    try {
      await this.informer.start();
    } catch (err) {
      threw = true;
      this.onError(err);
    }
    // Stopped while the first list was in flight (a gateway closed right after it started): the
    // informer began its watch after that stop, so it is stopped again now.
    if (this.stopped) return void (await this.informer.stop());
    // start() resolves even when the list failed (the failure goes to the error callback).
    if (!threw && this.errorCount === errorsBefore && !this.stopped) {
      if (!this.synced) this.log.debug('synced');
      this.synced = true;
      this.resolveFirstSync();
    }
  }

  private onError(err: unknown): void {
    if (this.stopped) return;
    this.failures++;
    this.errorCount++;
    const delay = Math.min(30_000, 250 * 2 ** Math.min(this.failures - 1, 7));
    this.log.warn({ err: describeApiError(err), retryInMs: delay }, 'watch failed; restarting');
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => void this.run(), delay);
    this.restartTimer.unref();
  }

  get isSynced(): boolean {
    return this.synced;
  }

  on(event: InformerEvent, listener: (obj: T) => void): void {
    this.events.on(event, listener);
  }

  off(event: InformerEvent, listener: (obj: T) => void): void {
    this.events.off(event, listener);
  }

  /**
   * Resolves once `done` holds for the cached object `name` (checked now and on each of its
   * watch events), or after timeoutMs: read-your-writes for this replica. Never rejects: a slow
   * event only means the cache catches up a little later.
   */
  waitFor(
    name: string,
    done: (cached: T | undefined) => boolean,
    timeoutMs = 3000,
    namespace = this.namespace,
  ): Promise<void> {
    if (done(this.get(name, namespace))) return Promise.resolve();
    return new Promise((resolve) => {
      const verbs = ['add', 'update', 'delete'] as const;
      const finish = () => {
        clearTimeout(timer);
        for (const verb of verbs) this.events.off(verb, onEvent);
        resolve();
      };
      const onEvent = (obj: T) => {
        if (obj.metadata?.name === name && done(this.get(name, namespace))) finish();
      };
      const timer = setTimeout(finish, timeoutMs);
      timer.unref();
      for (const verb of verbs) this.events.on(verb, onEvent);
    });
  }

  list(): readonly T[] {
    return this.informer.list();
  }

  /** The cached object by name, in the watched namespace unless another is given. */
  get(name: string, namespace: string | undefined = this.namespace): T | undefined {
    return this.informer.get(name, namespace);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.restartTimer);
    await this.informer.stop();
  }
}

/** Watch source for a namespaced kiteline.io custom resource. */
export function customResourceSource<T extends k8s.KubernetesObject>(
  kc: k8s.KubeConfig,
  namespace: string,
  plural: string,
  group = 'kiteline.io',
  version = 'v1alpha1',
): InformerSource<T> {
  const api = kc.makeApiClient(k8s.CustomObjectsApi);
  return {
    name: plural,
    namespace,
    path: `/apis/${group}/${version}/namespaces/${namespace}/${plural}`,
    list: () =>
      api.listNamespacedCustomObject({ group, version, namespace, plural }) as Promise<k8s.KubernetesListObject<T>>,
  };
}

/** Watch source for the Secrets of one namespace. */
export function secretSource(
  kc: k8s.KubeConfig,
  namespace: string,
  labelSelector?: string,
): InformerSource<k8s.V1Secret> {
  const api = kc.makeApiClient(k8s.CoreV1Api);
  return {
    name: 'secrets',
    namespace,
    path: `/api/v1/namespaces/${namespace}/secrets`,
    list: () => api.listNamespacedSecret({ namespace, labelSelector }),
    ...(labelSelector ? { labelSelector } : {}),
  };
}
