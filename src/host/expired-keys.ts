// Deletes API keys some time after they expired: kubeconfig tokens are minted on every download,
// so without this their APIKeys and Secrets would pile up in the install namespace. An expired key
// already fails authentication the moment it expires (AuthService); it stays listed, marked by its
// `expiresAt`, for `expiredKeyRetentionSeconds` (default a day, so a user can see why a kubeconfig
// stopped working), then goes. No polling: one timer for the earliest key due, re-planned on every
// change of the keys. Every replica runs it; a key another replica deleted first is a 404, ignored.
import type { Logger } from '../log.js';
import { NotFoundError } from '../errors.js';
import { apiKeyName, type APIKeyStore } from './apikeys.js';
import { DueSweeper } from './due-sweeper.js';
import type { APIKeyResource } from './resources.js';
import type { HostStore } from './store.js';

export class ExpiredKeySweeper extends DueSweeper<APIKeyResource> {
  constructor(
    host: HostStore,
    private readonly keys: APIKeyStore,
    private readonly retentionMs: number,
    log: Logger,
  ) {
    super(log, 'deleting expired API keys', [host.apiKeys]);
  }

  protected candidates(): readonly APIKeyResource[] {
    return this.keys.list();
  }

  protected dueAt(key: APIKeyResource): number | undefined {
    const expires = Date.parse(key.spec?.expiresAt ?? '');
    return Number.isNaN(expires) ? undefined : expires + this.retentionMs;
  }

  protected async remove(key: APIKeyResource): Promise<void> {
    try {
      await this.keys.delete(key);
      this.log.info({ apiKey: apiKeyName(key), expiresAt: key.spec.expiresAt }, 'deleted an expired API key');
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
    }
  }
}
