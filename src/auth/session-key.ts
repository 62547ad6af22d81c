// The session signing key: 32 random bytes in the Secret `kiteline-session-key` of the install
// namespace, created by the first replica that starts (a create that gets 409 means another
// replica won: we read theirs), so every replica signs and checks sessions with the same key.
// Replacing the Secret rotates the key (every session ends); the cache picks the change up.
import { randomBytes } from 'node:crypto';
import { apiStatus } from '../host/host-errors.js';
import { MANAGED_BY, MANAGED_BY_LABEL } from '../host/resources.js';
import type { HostStore } from '../host/store.js';

export const SESSION_KEY_SECRET = 'kiteline-session-key';
const KEY_FIELD = 'key';
const MIN_KEY_BYTES = 32;

function decode(raw: string | undefined): Buffer | undefined {
  const key = raw ? Buffer.from(raw, 'base64') : undefined;
  return key && key.length >= MIN_KEY_BYTES ? key : undefined;
}

export class SessionKey {
  private key: Buffer | undefined;
  private keyVersion: string | undefined;

  constructor(private readonly host: HostStore) {}

  /** Reads the key, creating it when missing. */
  async ensure(): Promise<void> {
    const { core, namespace } = this.host;
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        const secret = await core.readNamespacedSecret({ name: SESSION_KEY_SECRET, namespace });
        const key = decode(secret.data?.[KEY_FIELD]);
        if (!key) throw new Error(`Secret ${SESSION_KEY_SECRET} must hold a "${KEY_FIELD}" of at least ${MIN_KEY_BYTES} bytes`);
        this.key = key;
        this.keyVersion = secret.metadata?.resourceVersion;
        return;
      } catch (err) {
        if (apiStatus(err) !== 404) throw err;
      }
      try {
        await core.createNamespacedSecret({
          namespace,
          body: {
            metadata: { name: SESSION_KEY_SECRET, labels: { [MANAGED_BY_LABEL]: MANAGED_BY } },
            type: 'Opaque',
            data: { [KEY_FIELD]: randomBytes(MIN_KEY_BYTES).toString('base64') },
          },
        });
      } catch (err) {
        if (apiStatus(err) !== 409) throw err;
      }
    }
    throw new Error(`could not read or create Secret ${SESSION_KEY_SECRET}`);
  }

  /** The current key, from the cache when it has a newer valid one. */
  current(): Buffer {
    const secret = this.host.secrets.get(SESSION_KEY_SECRET, this.host.namespace);
    const version = secret?.metadata?.resourceVersion;
    if (secret && version !== this.keyVersion) {
      const key = decode(secret.data?.[KEY_FIELD]);
      if (key) {
        this.key = key;
        this.keyVersion = version;
      }
    }
    if (!this.key) throw new Error('session key not loaded (AuthService.start not called)');
    return this.key;
  }
}
