// What the setting stores (general-setting.ts, ldap-setting.ts) share: a setting is ONE custom
// resource of its kind, of a fixed name, in the install namespace (Kite keeps each in one database
// row; the CRD refuses any other name), read from its watch-backed cache, with at most one Secret
// beside it that it owns. Until it is first written the setting has its defaults. A write is a
// compare-and-swap decided on the object as the API server has it (created when absent; a lost race
// decides again on the new object, host/retry.ts), and returns once this replica's cache shows it,
// so a change made by the API or by `kubectl apply` is what the next request sees, on every replica.
import { hasVersion } from './cache-sync.js';
import { CustomResources, type Plural } from './crud.js';
import { isAlreadyExists, isNotFound } from './host-errors.js';
import type { WatchedCache } from './informer.js';
import { secretValue, writeOwnedSecret, type OwnedSecret } from './owned-secrets.js';
import { MANAGED_BY, MANAGED_BY_LABEL, type KiteResource } from './resources.js';
import { retryOnConflict } from './retry.js';
import type { HostStore } from './store.js';

export interface SettingDefinition<T extends KiteResource> {
  plural: Plural;
  kind: string;
  /** The one object's name. */
  name: string;
  /** The setting in messages: "general settings". */
  noun: string;
  cache: (host: HostStore) => WatchedCache<T>;
}

/** What a write decided: the whole new spec, and a Secret to write with it. */
export interface SettingChange<S> {
  spec: S;
  secret?: OwnedSecret;
}

export class SettingStore<S extends object, T extends KiteResource & { spec?: S }> {
  readonly cache: WatchedCache<T>;
  private readonly crs: CustomResources<T>;

  constructor(
    protected readonly host: HostStore,
    private readonly definition: SettingDefinition<T>,
  ) {
    this.cache = definition.cache(host);
    this.crs = new CustomResources<T>(host.customObjects, host.namespace, definition.plural, definition.kind);
  }

  /** The setting's object as this replica's cache has it; undefined: never written (defaults). */
  protected object(): T | undefined {
    return this.cache.get(this.definition.name);
  }

  /** A value of a Secret of the install namespace (from the cache). */
  protected secretValue(secretName: string | undefined, key: string): string | undefined {
    return secretName ? secretValue(this.host.secrets.get(secretName, this.host.namespace), key) : undefined;
  }

  /**
   * Writes the setting: `decide` sees the object as the API server has it now (undefined: none yet)
   * and returns the change (undefined: nothing to write; it may throw to refuse, before anything is
   * written). The object is created, or replaced carrying the resourceVersion it was decided on; its
   * Secret is written before a replace (so the new spec never names a Secret without the new value)
   * and after a create (it is owned by the object, which is deleted again if the Secret fails).
   * Returns the object as written (the one there when nothing was).
   */
  protected async write(decide: (live: T | undefined) => SettingChange<S> | undefined): Promise<T | undefined> {
    const { name, kind, noun } = this.definition;
    return retryOnConflict(
      `the ${noun}`,
      async () => {
        let live: T | undefined;
        try {
          live = await this.crs.read(name);
        } catch (err) {
          if (!isNotFound(err)) throw err;
        }
        const change = decide(live);
        if (!change) return live;
        let written: T;
        if (live) {
          if (change.secret) await writeOwnedSecret(this.host, live, change.secret);
          written = await this.crs.replace({ ...live, spec: change.spec });
        } else {
          const body = { metadata: { name, labels: { [MANAGED_BY_LABEL]: MANAGED_BY } }, spec: change.spec };
          written = await this.crs.create(body as unknown as Omit<T, 'apiVersion' | 'kind'>);
          if (change.secret) {
            try {
              await writeOwnedSecret(this.host, { ...written, kind, apiVersion: this.crs.apiVersion }, change.secret);
            } catch (err) {
              await this.crs.delete(name, written.metadata.uid).catch(() => undefined);
              throw err;
            }
          }
        }
        await this.cache.waitFor(name, hasVersion(written));
        return written;
      },
      { retryOn: isAlreadyExists },
    );
  }
}
