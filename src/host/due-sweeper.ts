// Deletes objects once they are due, without polling: one timer for the earliest object due,
// re-planned on every change of the caches that decide it (each change may add, move or drop a due
// time). Every replica runs its sweepers; a delete another replica made first is skipped by the
// subclass. The shared part of the expired API keys' sweeper (expired-keys.ts) and the role-less
// users' (auth/roleless-users.ts).
import type { Logger } from '../log.js';
import { describeApiError } from './host-errors.js';
import { SerialTask } from './serial-task.js';

/** setTimeout's largest delay; a later due time is re-planned when that timer fires. */
const MAX_DELAY_MS = 2 ** 31 - 1;

/** A cache whose changes re-plan the sweep (a WatchedCache). */
export interface ChangeSource {
  on(event: 'add' | 'update' | 'delete', listener: () => void): unknown;
}

export abstract class DueSweeper<T> {
  private readonly task: SerialTask;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    protected readonly log: Logger,
    /** What failed, for the warning: e.g. "deleting expired API keys". */
    what: string,
    private readonly sources: readonly ChangeSource[],
  ) {
    this.task = new SerialTask(
      () => this.sweep(),
      (err) => this.log.warn({ err: describeApiError(err) }, `${what} failed; will retry on the next change`),
    );
  }

  /** The objects that may come due. */
  protected abstract candidates(): readonly T[];
  /** When the object is due (ms since the epoch); undefined: never. */
  protected abstract dueAt(item: T): number | undefined;
  /** Deletes a due object (and logs it); one gone already is not an error. */
  protected abstract remove(item: T): Promise<void>;

  start(): void {
    for (const source of this.sources)
      for (const event of ['add', 'update', 'delete'] as const) source.on(event, () => this.task.request());
    this.task.request();
  }

  stop(): void {
    this.task.stop();
    clearTimeout(this.timer);
  }

  private async sweep(): Promise<void> {
    const now = Date.now();
    let next = Infinity;
    for (const item of this.candidates()) {
      const due = this.dueAt(item);
      if (due === undefined) continue;
      if (due > now) next = Math.min(next, due);
      else await this.remove(item);
    }
    clearTimeout(this.timer);
    if (next === Infinity) return;
    this.timer = setTimeout(() => this.task.request(), Math.min(next - now + 50, MAX_DELAY_MS));
    this.timer.unref();
  }
}
