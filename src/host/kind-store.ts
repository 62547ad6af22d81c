// What every kind's store (users, API keys, roles, clusters) shares, written once: lookups from the
// watch-backed cache through an index (by id, by natural key), the atomic create with a fresh id
// (the object name derives from the natural key, so the API server's create decides uniqueness),
// an owned Secret created with it and rolled back with it, compare-and-swap updates through the one
// retry helper, deletes guarded by uid (and, when asked, resourceVersion), on-demand id
// assignment, and read-your-writes: every write returns once this replica's cache shows it.
//
// Host failures arrive translated (host-errors.ts); a store only turns the generic "not found on
// the host cluster" and "already exists" into its kind's own messages.
import { ConflictError, NotFoundError } from '../errors.js';
import { CacheIndex } from './cache-index.js';
import { hasVersion, isGone } from './cache-sync.js';
import { CustomResources, type Plural } from './crud.js';
import { isAlreadyExists, isNotFound } from './host-errors.js';
import { ensureId } from './id-assign.js';
import type { IdAllocator, IdKind } from './ids.js';
import type { WatchedCache } from './informer.js';
import { deleteOwnedSecret, writeOwnedSecret, type OwnedSecret } from './owned-secrets.js';
import { ID_LABEL, MANAGED_BY, MANAGED_BY_LABEL, resourceId, type KiteResource } from './resources.js';
import { retryOnConflict } from './retry.js';
import type { HostStore } from './store.js';

export interface KindDefinition<T extends KiteResource> {
  /** The custom resource's plural and kind, e.g. 'users' / 'User'. */
  plural: Plural & IdKind;
  kind: string;
  /** The kind in messages: "user", "API key". */
  noun: string;
  /** The natural key clients name objects by (username, role name, key name). */
  keyOf: (obj: T) => string | undefined;
  cache: (host: HostStore) => WatchedCache<T>;
}

export class KindStore<T extends KiteResource> {
  readonly index: CacheIndex<T>;
  readonly crs: CustomResources<T>;
  readonly cache: WatchedCache<T>;

  constructor(
    protected readonly host: HostStore,
    protected readonly ids: IdAllocator,
    readonly definition: KindDefinition<T>,
  ) {
    this.cache = definition.cache(host);
    this.index = new CacheIndex(this.cache, definition.keyOf);
    this.crs = new CustomResources<T>(host.customObjects, host.namespace, definition.plural, definition.kind);
  }

  byId(id: number): T | undefined {
    return this.index.byId(id);
  }

  /** The object with this id; 404 "<noun> not found" when there is none (what routes answer). */
  getById(id: number): T {
    const obj = this.index.byId(id);
    if (!obj) throw this.notFound(undefined);
    return obj;
  }

  /** The object holding the natural key (the oldest, should two claim it), id or not. */
  byKey(key: string): T | undefined {
    return this.index.byKey(key);
  }

  /** Objects with an id: the ones the API shows. */
  list(): readonly T[] {
    return this.index.all();
  }

  protected notFound(key: string | undefined): NotFoundError {
    return new NotFoundError(`${this.definition.noun} not found${key ? `: ${key}` : ''}`);
  }

  protected alreadyExists(key: string): ConflictError {
    return new ConflictError(`${this.definition.noun} already exists: ${key}`, 'AlreadyExists');
  }

  /** Resolves with `obj` once this replica's cache holds that version of it (read-your-writes). */
  protected async written<W extends T>(obj: W): Promise<W> {
    await this.cache.waitFor(obj.metadata.name, hasVersion(obj));
    return obj;
  }

  /**
   * Creates the object under a fresh id (labels ID and managed-by added here), then its owned
   * Secret; when the Secret fails the object is deleted again. 409 AlreadyExists when the key is
   * taken, also under races (the object name derives from the key). `secret` may be a function of
   * the created object (a Secret named after an object name that depends on the id).
   */
  protected async createWithId(
    key: string,
    build: (id: number) => Omit<T, 'apiVersion' | 'kind'>,
    secret?: OwnedSecret | ((created: T) => OwnedSecret),
  ): Promise<T> {
    if (this.byKey(key)) throw this.alreadyExists(key);
    const id = await this.ids.next(this.definition.plural, this.index.maxId());
    const body = build(id);
    body.metadata.labels = { ...body.metadata.labels, [ID_LABEL]: String(id), [MANAGED_BY_LABEL]: MANAGED_BY };
    let created: T;
    try {
      created = await this.crs.create(body);
    } catch (err) {
      throw isAlreadyExists(err) ? this.alreadyExists(key) : err;
    }
    if (secret) {
      try {
        await this.writeSecret(created, typeof secret === 'function' ? secret(created) : secret);
      } catch (err) {
        await this.crs.delete(created.metadata.name, created.metadata.uid).catch(() => undefined);
        throw err;
      }
    }
    return this.written(created);
  }

  /** Creates or updates the object's Secret (owned by it when created here); waits for the cache. */
  protected async writeSecret(owner: T, secret: OwnedSecret): Promise<void> {
    await writeOwnedSecret(
      this.host,
      { ...owner, kind: this.definition.kind, apiVersion: this.crs.apiVersion },
      secret,
    );
  }

  /** A merge patch of the object as it is now (no precondition). */
  protected async patch(obj: T, patch: object): Promise<T> {
    try {
      return await this.written(await this.crs.patch(obj.metadata.name, patch));
    } catch (err) {
      throw isNotFound(err) ? this.notFound(this.definition.keyOf(obj)) : err;
    }
  }

  /**
   * A compare-and-swap on the live object: `change` sees it and returns the merge patch to make
   * (undefined: nothing to do), which is sent with the resourceVersion it was decided on; a lost
   * race runs it again on the new live object.
   */
  protected async swap(obj: T, change: (live: T) => object | undefined): Promise<T> {
    const key = this.definition.keyOf(obj);
    return retryOnConflict(`${this.definition.noun} ${key}`, async () => {
      let live: T;
      try {
        live = await this.crs.read(obj.metadata.name);
      } catch (err) {
        throw isNotFound(err) ? this.notFound(key) : err;
      }
      const patch = change(live) as { metadata?: object } | undefined;
      if (!patch) return live;
      const guarded = { ...patch, metadata: { ...patch.metadata, resourceVersion: live.metadata.resourceVersion } };
      try {
        return await this.written(await this.crs.patch(live.metadata.name, guarded));
      } catch (err) {
        throw isNotFound(err) ? this.notFound(key) : err;
      }
    });
  }

  /**
   * Deletes the object as the caller saw it (uid precondition: a newer object of the same name is
   * left alone) and the Secret kiteline made for it; returns the deleted object once the cache no
   * longer holds it. With `guard`, a rule that may refuse the delete (by throwing): it is checked
   * on the live object and the delete is preconditioned on the resourceVersion it saw, so the
   * check and the delete are one compare-and-swap (a change meanwhile: checked again).
   */
  protected async remove(obj: T, secretName?: string, guard?: (live: T) => void): Promise<T> {
    const key = this.definition.keyOf(obj);
    const secret = secretName ? this.host.secrets.get(secretName, this.host.namespace) : undefined;
    const gone = guard
      ? await retryOnConflict(`${this.definition.noun} ${key}`, async () => {
          const live = await this.crs.read(obj.metadata.name).catch((err: unknown) => {
            throw isNotFound(err) ? this.notFound(key) : err;
          });
          if (live.metadata.uid !== obj.metadata.uid) throw this.notFound(key);
          guard(live);
          await this.deleteObject(live, live.metadata.resourceVersion);
          return live;
        })
      : await this.deleteObject(obj).catch((err: unknown) => {
          throw err instanceof ConflictError
            ? new ConflictError(`the ${this.definition.noun} changed meanwhile; try again`)
            : err;
        });
    await deleteOwnedSecret(this.host.core, this.host.namespace, secret);
    await this.cache.waitFor(gone.metadata.name, isGone(gone.metadata.uid));
    return gone;
  }

  /** The delete call itself, preconditioned on uid (and resourceVersion when given). */
  private async deleteObject(obj: T, resourceVersion?: string): Promise<T> {
    try {
      await this.crs.delete(obj.metadata.name, obj.metadata.uid, resourceVersion);
      return obj;
    } catch (err) {
      throw isNotFound(err) ? this.notFound(this.definition.keyOf(obj)) : err;
    }
  }

  /**
   * The object's id, assigning one first when it has none yet (applied with kubectl); returns once
   * the cache shows the id, so byId finds the object. undefined when the object is gone.
   */
  async ensureId(obj: T): Promise<number | undefined> {
    const existing = resourceId(obj);
    if (existing !== undefined) return existing;
    const id = await ensureId(this.crs, this.ids, this.definition.plural, obj, this.index.maxId());
    if (id !== undefined)
      await this.cache.waitFor(obj.metadata.name, (cached) => cached !== undefined && resourceId(cached) === id);
    return id;
  }
}

/** For writes to objects other than the one asked about: one deleted meanwhile needs nothing. */
export function ignoreGone(err: unknown): void {
  if (!(err instanceof NotFoundError)) throw err;
}

/** The same strings in the same order (an absent list is empty). */
export function sameList(a: readonly string[] | undefined, b: readonly string[]): boolean {
  return (a ?? []).length === b.length && b.every((x, i) => a![i] === x);
}
