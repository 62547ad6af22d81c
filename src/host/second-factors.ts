// Where second factors live (docs/second-factors.md), three small stores:
//   - TotpSecrets: a user's TOTP factor in the Secret `<user object>-mfa` (owned by the User):
//     the shared secret (base32), one being enrolled, the SHA-256 of each unused recovery code, and
//     the last time step a code was accepted at. Every change is a compare-and-swap on the live
//     Secret, so a code accepted on one replica is refused on every other (replay).
//   - PasskeyStore: Passkey custom resources, the public half of each WebAuthn credential, named
//     after the credential id (registered once) and labelled with the user's id; read from the
//     watch-backed cache (sign-ins and status checks make no host call), written through the API.
//   - UsedChallenges: UsedChallenge custom resources, one per challenge answered, created before
//     the answer counts: the create is atomic, so a challenge is answered once across replicas.
// TOTP changes and used challenges read and write the host directly: they must be exact across
// replicas, and only a code or an answer that was checked leads to one (rate-limited).
import { createHash } from 'node:crypto';
import type * as k8s from '@kubernetes/client-node';
import { ConflictError, NotFoundError } from '../errors.js';
import { CustomResources, ownerReference } from './crud.js';
import { isAlreadyExists, isNotFound } from './host-errors.js';
import { secretValue } from './owned-secrets.js';
import {
  MANAGED_BY,
  MANAGED_BY_LABEL,
  resourceId,
  type PasskeyResource,
  type PasskeySpec,
  type UsedChallengeResource,
  type UserResource,
} from './resources.js';
import { retryOnConflict } from './retry.js';
import type { HostStore } from './store.js';

/** A user's TOTP factor as stored. */
export interface TotpState {
  /** The enrolled secret (base32); undefined: TOTP is off. */
  secret?: string;
  /** A secret being enrolled (setup done, not confirmed by a code yet) and when setup made it (ms). */
  pending?: string;
  pendingSince?: number;
  /** SHA-256 (hex) of each recovery code not used yet. */
  recoveryCodes: string[];
  /** The last time step a code was accepted at (replay: only later steps count). */
  lastTimeStep: number;
}

const KEYS = { secret: 'totpSecret', pending: 'totpPending', pendingSince: 'totpPendingSince' } as const;
const RECOVERY_KEY = 'recoveryCodes';
const STEP_KEY = 'lastTimeStep';

function decodeState(secret: k8s.V1Secret | undefined): TotpState {
  const value = (key: string) => secretValue(secret, key) || undefined;
  let codes: unknown;
  try {
    codes = JSON.parse(value(RECOVERY_KEY) ?? '[]');
  } catch {
    codes = [];
  }
  return {
    secret: value(KEYS.secret),
    pending: value(KEYS.pending),
    pendingSince: Number(value(KEYS.pendingSince)) || undefined,
    recoveryCodes: Array.isArray(codes) ? codes.filter((c): c is string => typeof c === 'string') : [],
    lastTimeStep: Number(value(STEP_KEY)) || 0,
  };
}

function encodeState(state: TotpState): Record<string, string> {
  const plain: Record<string, string> = {
    [RECOVERY_KEY]: JSON.stringify(state.recoveryCodes),
    [STEP_KEY]: String(state.lastTimeStep),
  };
  if (state.secret) plain[KEYS.secret] = state.secret;
  if (state.pending) plain[KEYS.pending] = state.pending;
  if (state.pendingSince) plain[KEYS.pendingSince] = String(state.pendingSince);
  return Object.fromEntries(Object.entries(plain).map(([k, v]) => [k, Buffer.from(v).toString('base64')]));
}

export class TotpSecrets {
  constructor(private readonly host: HostStore) {}

  private nameOf(user: UserResource): string {
    return `${user.metadata.name}-mfa`;
  }

  /** The user's factor as the cache has it (for showing state; changes read the live Secret). */
  state(user: UserResource): TotpState {
    return decodeState(this.host.secrets.get(this.nameOf(user), this.host.namespace));
  }

  /**
   * Reads the live state, asks `decide` for the next one (undefined: no write), and writes it as a
   * compare-and-swap; a lost race decides again on the newer state. Returns what was decided on, and
   * the state written.
   */
  async change(
    user: UserResource,
    decide: (state: TotpState) => TotpState | undefined | Promise<TotpState | undefined>,
  ): Promise<{ before: TotpState; after: TotpState }> {
    const { core, namespace } = this.host;
    const name = this.nameOf(user);
    return retryOnConflict(
      `the second factor of user ${user.spec.username}`,
      async () => {
        let live: k8s.V1Secret | undefined;
        try {
          live = await core.readNamespacedSecret({ name, namespace });
        } catch (err) {
          if (!isNotFound(err)) throw err;
        }
        const before = decodeState(live);
        const after = await decide(before);
        if (!after) return { before, after: before };
        if (!live) {
          await core.createNamespacedSecret({
            namespace,
            body: {
              metadata: {
                name,
                labels: { [MANAGED_BY_LABEL]: MANAGED_BY },
                ownerReferences: [ownerReference({ ...user, kind: 'User' })],
              },
              type: 'Opaque',
              data: encodeState(after),
            },
          });
        } else {
          await core.replaceNamespacedSecret({
            name,
            namespace,
            body: { ...live, data: encodeState(after) },
          });
        }
        return { before, after };
      },
      { retryOn: isAlreadyExists },
    );
  }

  /** Removes the user's TOTP factor and recovery codes (none: nothing). */
  async remove(user: UserResource): Promise<boolean> {
    try {
      await this.host.core.deleteNamespacedSecret({ name: this.nameOf(user), namespace: this.host.namespace });
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }
}

/** Label of a Passkey naming its user's id. */
export const PASSKEY_USER_LABEL = 'kiteline.io/user-id';
/** Passkeys one user may register. */
export const MAX_PASSKEYS_PER_USER = 20;

/** A passkey's object name: from its credential id, so a credential is registered once. */
export function passkeyObjectName(credentialId: string): string {
  return `pk-${createHash('sha256').update(credentialId).digest('hex').slice(0, 40)}`;
}

export class PasskeyStore {
  private readonly crs: CustomResources<PasskeyResource>;

  constructor(private readonly host: HostStore) {
    this.crs = new CustomResources(host.customObjects, host.namespace, 'passkeys', 'Passkey');
  }

  /** The user's passkeys, oldest first (from the cache). */
  ofUser(userId: number): PasskeyResource[] {
    return this.host.passkeys
      .list()
      .filter((p) => p.spec?.userId === userId && !p.metadata.deletionTimestamp)
      .sort((a, b) => String(a.metadata.creationTimestamp).localeCompare(String(b.metadata.creationTimestamp)));
  }

  /** The passkey of a credential id, if one is registered (from the cache). */
  byCredentialId(credentialId: string): PasskeyResource | undefined {
    return this.host.passkeys.get(passkeyObjectName(credentialId));
  }

  /** The user's passkey by object name; 404 when it is not theirs. */
  ofUserByName(userId: number, name: string): PasskeyResource {
    const found = this.host.passkeys.get(name);
    if (!found || found.spec?.userId !== userId) throw new NotFoundError(`passkey not found: ${name.slice(0, 63)}`);
    return found;
  }

  /** Registers a passkey for the user: 409 when the credential is registered already, or at the limit. */
  async create(user: UserResource, spec: Omit<PasskeySpec, 'userId' | 'username'>): Promise<PasskeyResource> {
    const userId = resourceId(user)!;
    if (this.ofUser(userId).length >= MAX_PASSKEYS_PER_USER)
      throw new ConflictError(`at most ${MAX_PASSKEYS_PER_USER} passkeys per user: delete one first`);
    let created: PasskeyResource;
    try {
      created = await this.crs.create({
        metadata: {
          name: passkeyObjectName(spec.credentialId),
          labels: { [PASSKEY_USER_LABEL]: String(userId), [MANAGED_BY_LABEL]: MANAGED_BY },
          ownerReferences: [ownerReference({ ...user, kind: 'User' })],
        },
        spec: { ...spec, userId, username: user.spec.username },
      });
    } catch (err) {
      if (err instanceof ConflictError || isAlreadyExists(err))
        throw new ConflictError('this passkey is registered already', 'AlreadyExists');
      throw err;
    }
    await this.host.passkeys.waitFor(created.metadata.name, (cached) => cached !== undefined);
    return created;
  }

  async rename(passkey: PasskeyResource, name: string): Promise<PasskeyResource> {
    const renamed = await this.crs.patch(passkey.metadata.name, { spec: { name } });
    await this.host.passkeys.waitFor(
      renamed.metadata.name,
      (c) => c?.metadata.resourceVersion === renamed.metadata.resourceVersion,
    );
    return renamed;
  }

  async delete(passkey: PasskeyResource): Promise<void> {
    await this.crs.delete(passkey.metadata.name, passkey.metadata.uid);
    await this.host.passkeys.waitFor(passkey.metadata.name, (cached) => cached === undefined);
  }

  /** Deletes every passkey of the user (an admin's reset); how many there were. */
  async deleteAllOf(userId: number): Promise<number> {
    const all = this.ofUser(userId);
    for (const passkey of all) {
      await this.delete(passkey).catch((err: unknown) => {
        if (!(err instanceof NotFoundError)) throw err;
      });
    }
    return all.length;
  }

  /** Records a sign-in: the authenticator's counter and the time. */
  async recordUse(passkey: PasskeyResource, counter: number): Promise<void> {
    await this.crs.patchStatus(passkey.metadata.name, {
      counter,
      lastUsedAt: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
    });
  }
}

/** How often every replica deletes the used challenges that would have expired. */
const SWEEP_INTERVAL_MS = 5 * 60_000;

export class UsedChallenges {
  private readonly crs: CustomResources<UsedChallengeResource>;
  private timer: NodeJS.Timeout | undefined;

  constructor(host: HostStore) {
    this.crs = new CustomResources(host.customObjects, host.namespace, 'usedchallenges', 'UsedChallenge');
  }

  /**
   * Marks the challenge `id` (a digest: at most 63 characters of [a-z0-9]) answered: true the first
   * time on any replica, false when it was answered before.
   */
  async use(id: string, purpose: string, userId: number, expiresAtMs: number): Promise<boolean> {
    try {
      await this.crs.create({
        metadata: { name: `ch-${id}`, labels: { [MANAGED_BY_LABEL]: MANAGED_BY } },
        spec: { purpose, userId, expiresAt: new Date(expiresAtMs).toISOString() },
      });
      return true;
    } catch (err) {
      if ((err instanceof ConflictError && err.reason === 'AlreadyExists') || isAlreadyExists(err)) return false;
      throw err;
    }
  }

  /** Deletes used challenges past their expiry now and every few minutes (every replica; 404s ignored). */
  start(onError: (err: unknown) => void): void {
    const sweep = () => void this.sweep().catch(onError);
    sweep();
    this.timer = setInterval(sweep, SWEEP_INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async sweep(): Promise<void> {
    const now = Date.now();
    for (const used of await this.crs.list()) {
      if (Date.parse(used.spec?.expiresAt ?? '') > now) continue;
      await this.crs.delete(used.metadata.name, used.metadata.uid).catch((err) => {
        if (!(err instanceof NotFoundError)) throw err;
      });
    }
  }
}
