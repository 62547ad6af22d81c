// The one conflict-retry helper of the host layer. A compare-and-swap write (a replace or patch
// carrying the resourceVersion it was decided on, a create that must not collide) loses when
// another writer got there first; the whole read-decide-write step runs again, after a short
// random pause that grows with each attempt so racing replicas spread out.
import { ConflictError } from '../errors.js';
import { isStale } from './host-errors.js';

export interface RetryOptions {
  /** How many times the step runs at most (default 10). */
  attempts?: number;
  /** The pause before attempt n is random in [0, backoffMs * n) milliseconds (default 20). */
  backoffMs?: number;
  /** Besides a lost compare-and-swap, what counts as "run again" (e.g. an id already taken). */
  retryOn?: (err: unknown) => boolean;
}

/**
 * Runs `step` until it does not fail with a lost compare-and-swap (ConflictError, reason
 * Conflict). Out of attempts: ConflictError "`what` is being changed concurrently; try again".
 * Any other error ends it at once.
 */
export async function retryOnConflict<T>(
  what: string,
  step: (attempt: number) => Promise<T>,
  options: RetryOptions = {},
): Promise<T> {
  const { attempts = 10, backoffMs = 20, retryOn } = options;
  for (let attempt = 1; ; attempt++) {
    try {
      return await step(attempt);
    } catch (err) {
      if (!isStale(err) && !retryOn?.(err)) throw err;
      if (attempt >= attempts) throw new ConflictError(`${what} is being changed concurrently; try again`);
    }
    await new Promise((resolve) => setTimeout(resolve, Math.random() * backoffMs * attempt));
  }
}
