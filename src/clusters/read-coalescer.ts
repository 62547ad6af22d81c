// Read coalescing: identical GETs of one object that wait at the same time share one upstream
// read, without weakening what a GET promises (the object as it is now, never an older copy).
//
// The rule that keeps reads current: a request never joins a read that was already sent. Per key
// there is at most one read in flight; requests that arrive meanwhile gather in the next batch,
// which is sent when the one in flight settles. So every answer comes from a read that the API
// server started after the request arrived and finished before it was answered: what a direct GET
// at that moment could have returned. No answer outlives its batch: this is not a cache.
//
// A waiter whose client leaves is dropped from its batch; a batch nobody waits for any more is
// not sent, or is aborted when it is in flight. Errors reach everyone in the batch, and the next
// batch still sends its own read.
import { abortError } from '../errors.js';
import type { BufferedAnswer } from './types.js';

const READ_ABORTED = 'the read was aborted';

/** Sends the one upstream read of a batch; the signal aborts it when nobody waits any more. */
export type ReadFetcher = (signal: AbortSignal) => Promise<BufferedAnswer>;

interface Waiter {
  resolve(answer: BufferedAnswer): void;
  reject(err: unknown): void;
  /** Removes the waiter's abort listener (once settled). */
  release(): void;
}

interface Batch {
  fetch: ReadFetcher;
  waiters: Set<Waiter>;
  controller: AbortController;
  sent: boolean;
}

interface KeyState {
  inFlight?: Batch;
  next?: Batch;
}

export class ReadCoalescer {
  /** In-flight and gathering batches by key: entries live only while someone waits. */
  private readonly keys = new Map<string, KeyState>();

  /** @param onShared told how many answers a settled read gave beyond the first (metrics). */
  constructor(private readonly onShared: (count: number) => void = () => {}) {}

  /** Keys with a read in flight or gathering (0 when idle). */
  get pending(): number {
    return this.keys.size;
  }

  /**
   * The answer to the read `key` names: from a read sent now when none is in flight, else from
   * the next batch's read. `fetch` sends the read (the first waiter's is used for its batch).
   */
  read(key: string, fetch: ReadFetcher, signal?: AbortSignal): Promise<BufferedAnswer> {
    if (signal?.aborted) return Promise.reject(abortError(READ_ABORTED));
    let state = this.keys.get(key);
    if (!state) {
      state = {};
      this.keys.set(key, state);
    }
    const sendNow = !state.inFlight;
    let batch: Batch;
    if (sendNow) {
      batch = newBatch(fetch);
      state.inFlight = batch;
    } else {
      batch = state.next ??= newBatch(fetch);
    }
    const answer = this.join(key, state, batch, signal);
    if (sendNow) this.send(key, state, batch);
    return answer;
  }

  private join(key: string, state: KeyState, batch: Batch, signal: AbortSignal | undefined): Promise<BufferedAnswer> {
    return new Promise<BufferedAnswer>((resolve, reject) => {
      const onAbort = () => {
        batch.waiters.delete(waiter);
        reject(abortError(READ_ABORTED));
        if (batch.waiters.size > 0) return;
        if (batch.sent) batch.controller.abort();
        else if (state.next === batch) {
          state.next = undefined;
          if (!state.inFlight) this.keys.delete(key);
        }
      };
      const waiter: Waiter = {
        resolve,
        reject,
        release: () => signal?.removeEventListener('abort', onAbort),
      };
      batch.waiters.add(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  private send(key: string, state: KeyState, batch: Batch): void {
    batch.sent = true;
    let read: Promise<BufferedAnswer>;
    try {
      read = batch.fetch(batch.controller.signal);
    } catch (err) {
      read = Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    read.then(
      (answer) => {
        if (batch.waiters.size > 1) this.onShared(batch.waiters.size - 1);
        this.settle(key, state, batch, (w) => w.resolve(answer));
      },
      (err) => this.settle(key, state, batch, (w) => w.reject(err)),
    );
  }

  /** Answers the batch's waiters, then sends the next batch, or forgets the key. */
  private settle(key: string, state: KeyState, batch: Batch, answer: (w: Waiter) => void): void {
    for (const waiter of batch.waiters) {
      waiter.release();
      answer(waiter);
    }
    batch.waiters.clear();
    state.inFlight = undefined;
    const next = state.next;
    state.next = undefined;
    if (next && next.waiters.size > 0) {
      state.inFlight = next;
      this.send(key, state, next);
    } else {
      this.keys.delete(key);
    }
  }
}

function newBatch(fetch: ReadFetcher): Batch {
  return { fetch, waiters: new Set(), controller: new AbortController(), sent: false };
}
