// Deletes API keys some time after they expired: kubeconfig tokens are minted on every download,
// so without this their APIKeys and Secrets would pile up in the install namespace. An expired key
// already fails authentication the moment it expires (AuthService); it stays listed, marked by its
// `expiresAt`, for `expiredKeyRetentionSeconds` (default a day, so a user can see why a kubeconfig
// stopped working), then goes. No polling: one timer for the earliest key due, re-planned on every
// change of the keys. Every replica runs it; a key another replica deleted first is a 404, ignored.
import type { Logger } from '../log.js';
import { NotFoundError } from '../errors.js';
import { apiKeyName, type APIKeyStore } from './apikeys.js';
import { describeApiError } from './host-errors.js';
import { SerialTask } from './serial-task.js';
import type { HostStore } from './store.js';

/** setTimeout's largest delay; a later due time is re-planned when that timer fires. */
const MAX_DELAY_MS = 2 ** 31 - 1;

export class ExpiredKeySweeper {
  private readonly task: SerialTask;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly host: HostStore,
    private readonly keys: APIKeyStore,
    private readonly retentionMs: number,
    private readonly log: Logger,
  ) {
    this.task = new SerialTask(
      () => this.sweep(),
      (err) =>
        this.log.warn(
          { err: describeApiError(err) },
          'deleting expired API keys failed; will retry on the next change',
        ),
    );
  }

  start(): void {
    for (const event of ['add', 'update', 'delete'] as const) this.host.apiKeys.on(event, () => this.task.request());
    this.task.request();
  }

  stop(): void {
    this.task.stop();
    clearTimeout(this.timer);
  }

  private async sweep(): Promise<void> {
    const now = Date.now();
    let next = Infinity;
    for (const key of this.keys.list()) {
      const expires = Date.parse(key.spec?.expiresAt ?? '');
      if (Number.isNaN(expires)) continue;
      const due = expires + this.retentionMs;
      if (due > now) {
        next = Math.min(next, due);
        continue;
      }
      try {
        await this.keys.delete(key);
        this.log.info({ apiKey: apiKeyName(key), expiresAt: key.spec.expiresAt }, 'deleted an expired API key');
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw err;
      }
    }
    clearTimeout(this.timer);
    if (next === Infinity) return;
    this.timer = setTimeout(() => this.task.request(), Math.min(next - now, MAX_DELAY_MS));
    this.timer.unref();
  }
}
