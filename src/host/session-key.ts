// The session signing key: 32 random bytes in the Secret `kiteline-session-key` of the install
// namespace, created by the first replica that starts (a create that collides means another
// replica won: the retry reads theirs), so every replica signs and checks sessions with the same
// key. Replacing the Secret rotates the key (every session ends); the cache picks the change up.
// A host store like the others (it owns one Secret); authentication (auth/) only reads current().
import { randomBytes } from 'node:crypto';
import { isAlreadyExists, isNotFound } from './host-errors.js';
import { MANAGED_BY, MANAGED_BY_LABEL } from './resources.js';
import { retryOnConflict } from './retry.js';
import type { HostStore } from './store.js';

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

  /** Reads the key, creating it when missing (a lost create race reads the winner's). */
  async ensure(): Promise<void> {
    const { core, namespace } = this.host;
    const secret = await retryOnConflict(
      `Secret ${SESSION_KEY_SECRET}`,
      async () => {
        try {
          return await core.readNamespacedSecret({ name: SESSION_KEY_SECRET, namespace });
        } catch (err) {
          if (!isNotFound(err)) throw err;
        }
        return core.createNamespacedSecret({
          namespace,
          body: {
            metadata: { name: SESSION_KEY_SECRET, labels: { [MANAGED_BY_LABEL]: MANAGED_BY } },
            type: 'Opaque',
            data: { [KEY_FIELD]: randomBytes(MIN_KEY_BYTES).toString('base64') },
          },
        });
      },
      { attempts: 5, retryOn: isAlreadyExists },
    );
    const key = decode(secret.data?.[KEY_FIELD]);
    if (!key)
      throw new Error(`Secret ${SESSION_KEY_SECRET} must hold a "${KEY_FIELD}" of at least ${MIN_KEY_BYTES} bytes`);
    this.key = key;
    this.keyVersion = secret.metadata?.resourceVersion;
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
    if (!this.key) throw new Error('session key not loaded (IdentityStores.start not called)');
    return this.key;
  }
}
