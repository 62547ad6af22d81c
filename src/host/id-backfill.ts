// Background id assignment for objects applied with kubectl (no id label, or an id an older object
// holds), for any kind's store (a KindStore is a target): the identity stores (admin-stores.ts)
// use it. Runs on every replica on cache events; the resourceVersion-guarded patch in assignId
// makes sure only one replica's id lands. (A leader lease would save the few unused ids a race
// burns; correctness does not need it.)
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from '../log.js';
import type { CacheIndex } from './cache-index.js';
import type { CustomResources } from './crud.js';
import { assignId } from './id-assign.js';
import type { IdAllocator, IdKind } from './ids.js';
import type { WatchedCache } from './informer.js';
import { describeApiError } from './host-errors.js';
import { SerialTask } from './serial-task.js';

/** What back-fill needs of a kind's store (every KindStore has it). */
export interface BackfillTarget<T extends KubernetesObject = KubernetesObject> {
  readonly definition: { plural: IdKind };
  readonly cache: Pick<WatchedCache<T>, 'on'>;
  readonly index: Pick<CacheIndex<T>, 'needingIds' | 'maxId'>;
  readonly crs: CustomResources<T>;
}

export class IdBackfill {
  private readonly tasks: SerialTask[] = [];

  constructor(
    private readonly ids: IdAllocator,
    private readonly log: Logger,
    private readonly targets: readonly BackfillTarget[],
  ) {}

  start(): void {
    for (const target of this.targets) {
      const task = new SerialTask(
        () => this.fill(target),
        (err) =>
          this.log.warn(
            { kind: target.definition.plural, err: describeApiError(err) },
            'id back-fill failed; will retry on the next change',
          ),
      );
      this.tasks.push(task);
      target.cache.on('add', () => task.request());
      target.cache.on('update', () => task.request());
      task.request();
    }
  }

  stop(): void {
    for (const task of this.tasks) task.stop();
  }

  private async fill(target: BackfillTarget): Promise<void> {
    const kind = target.definition.plural;
    for (const obj of target.index.needingIds()) {
      const patched = await assignId(target.crs, this.ids, kind, obj, target.index.maxId());
      if (patched) this.log.info({ kind, object: obj.metadata?.name }, 'assigned an id');
    }
  }
}
