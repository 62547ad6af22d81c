// API keys in the host cluster: APIKey custom resources named objectNameFor('apikey', name) (key
// names are unique) with the SHA-256 of the key's secret in an owned Secret (key keyHash).
// Deleting the APIKey revokes the key at once: the gateway only trusts keys in its cache.
import { generateApiKey } from '../auth/apikey-token.js';
import { ConflictError, NotFoundError } from '../errors.js';
import { CacheIndex } from './cache-index.js';
import { hasVersion, isGone } from './cache-sync.js';
import { CustomResources } from './crud.js';
import type { IdAllocator } from './ids.js';
import { apiStatus } from './host-errors.js';
import { objectNameFor } from './names.js';
import { deleteOwnedSecret, secretValue, upsertSecret } from './owned-secrets.js';
import { ID_LABEL, MANAGED_BY, MANAGED_BY_LABEL, resourceId, type APIKeyResource, type UserResource } from './resources.js';
import type { HostStore } from './store.js';

export const KEY_HASH_KEY = 'keyHash';

export interface NewApiKey {
  name: string;
  roles: string[];
  expiresAt: string | null;
  createdBy: string;
  /** The user the key acts for (its owner; the key is deleted with the user). */
  owner?: UserResource;
}

export function apiKeyName(key: APIKeyResource): string {
  return key.spec?.name || key.metadata.name;
}

export class APIKeyStore {
  readonly index: CacheIndex<APIKeyResource>;
  readonly crs: CustomResources<APIKeyResource>;

  constructor(
    private readonly host: HostStore,
    private readonly ids: IdAllocator,
  ) {
    this.index = new CacheIndex(host.apiKeys, apiKeyName);
    this.crs = new CustomResources<APIKeyResource>(host.customObjects, host.namespace, 'apikeys', 'APIKey');
  }

  byId(id: number): APIKeyResource | undefined {
    return this.index.byId(id);
  }

  list(): readonly APIKeyResource[] {
    return this.index.all();
  }

  keyHash(key: APIKeyResource): string | undefined {
    const ref = key.spec?.secretRef?.name;
    return ref ? secretValue(this.host.secrets.get(ref, this.host.namespace), KEY_HASH_KEY) : undefined;
  }

  /** Creates the key; the returned `key` value exists only in this answer. */
  async create(input: NewApiKey): Promise<{ resource: APIKeyResource; key: string }> {
    if (this.index.byKey(input.name)) throw alreadyExists(input.name);
    const id = await this.ids.next('apikeys', this.index.maxId());
    const name = objectNameFor('apikey', input.name);
    const secretName = `${name}-key`;
    const { key, keyHash } = generateApiKey(id);
    let created: APIKeyResource;
    try {
      created = await this.crs.create({
        metadata: { name, labels: { [ID_LABEL]: String(id), [MANAGED_BY_LABEL]: MANAGED_BY }, ...(input.owner ? { ownerReferences: [ownerReference(input.owner)] } : {}) },
        spec: {
          name: input.name,
          roles: input.roles,
          expiresAt: input.expiresAt,
          createdBy: input.createdBy,
          ...(input.owner ? { owner: { username: input.owner.spec.username, id: resourceId(input.owner)! } } : {}),
          secretRef: { name: secretName },
        },
      });
    } catch (err) {
      if (apiStatus(err) === 409) throw alreadyExists(input.name);
      throw err;
    }
    try {
      const secret = await upsertSecret(this.host.core, this.host.namespace, secretName, { [KEY_HASH_KEY]: keyHash }, { owner: created });
      await this.host.secrets.waitFor(secretName, hasVersion(secret));
    } catch (err) {
      await this.crs.delete(name, created.metadata.uid).catch(() => undefined);
      throw err;
    }
    await this.host.apiKeys.waitFor(name, hasVersion(created));
    return { resource: created, key };
  }

  async delete(key: APIKeyResource): Promise<void> {
    const secretName = key.spec?.secretRef?.name;
    const secret = secretName ? this.host.secrets.get(secretName, this.host.namespace) : undefined;
    try {
      await this.crs.delete(key.metadata.name, key.metadata.uid);
    } catch (err) {
      if (apiStatus(err) === 404) throw new NotFoundError(`API key not found: ${apiKeyName(key)}`);
      throw err;
    }
    await deleteOwnedSecret(this.host.core, this.host.namespace, secret);
    await this.host.apiKeys.waitFor(key.metadata.name, isGone(key.metadata.uid));
  }

  /** Removes a deleted role from every key that holds it (compare-and-swap per key). */
  async removeRole(role: string): Promise<void> {
    for (const key of this.host.apiKeys.list()) {
      if (!(key.spec?.roles ?? []).includes(role)) continue;
      for (let attempt = 0; attempt < 10; attempt++) {
        try {
          const live = await this.crs.read(key.metadata.name);
          await this.crs.patch(key.metadata.name, {
            metadata: { resourceVersion: live.metadata.resourceVersion },
            spec: { roles: (live.spec.roles ?? []).filter((r) => r !== role) },
          });
          break;
        } catch (err) {
          if (apiStatus(err) === 404) break;
          if (apiStatus(err) !== 409) throw err;
        }
      }
    }
  }

  /** Writes status.lastUsedAt (callers throttle). */
  async recordUse(key: APIKeyResource, at: Date): Promise<void> {
    await this.crs.patchStatus(key.metadata.name, { lastUsedAt: at.toISOString().replace(/\.\d{3}Z$/, 'Z') });
  }
}

/** The owner's User as the key's ownerReference: deleting the user deletes the key (and its Secret). */
function ownerReference(user: UserResource) {
  return { apiVersion: user.apiVersion ?? 'kiteline.io/v1alpha1', kind: user.kind ?? 'User', name: user.metadata.name, uid: user.metadata.uid! };
}

function alreadyExists(name: string): ConflictError {
  return new ConflictError(`API key already exists: ${name}`, 'AlreadyExists');
}
