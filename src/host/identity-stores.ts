// The identity stores of a replica, assembled in one place: users, roles and API keys (one store
// per kind), the session signing key, second factors (TOTP Secrets, passkeys, used challenges), and
// their background reconcilers (id back-fill for objects applied with kubectl, hashing plain
// passwords applied with kubectl, deleting long-expired API keys, deleting expired used
// challenges). server.ts builds it on the HostStore and starts it once the host caches are synced;
// the routes use the stores through Services (services.users, services.roles, services.apiKeys) and
// authentication (auth/auth-service.ts) only reads them.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Config } from '../config.js';
import { limitPasswordHashing } from '../credentials/passwords.js';
import type { Logger } from '../log.js';
import { APIKeyStore } from './apikeys.js';
import { ExpiredKeySweeper } from './expired-keys.js';
import { GeneralSettingStore } from './general-setting.js';
import { IdBackfill } from './id-backfill.js';
import { IdAllocator } from './ids.js';
import { LDAP_SOURCE } from './group-subjects.js';
import { LdapSettingStore } from './ldap-setting.js';
import { OAuthProviderStore, providerName } from './oauth-providers.js';
import { secretValue } from './owned-secrets.js';
import { PlainPasswordHasher } from './password-hasher.js';
import { PasskeyStore, TotpSecrets, UsedChallenges } from './second-factors.js';
import { ADMIN_ROLE, RoleStore } from './roles.js';
import { SessionKey } from './session-key.js';
import type { WatchedCache } from './informer.js';
import type { HostStore } from './store.js';
import { UserStore } from './users.js';

const INFORMER_EVENTS = ['add', 'update', 'delete'] as const;

export class IdentityStores {
  readonly users: UserStore;
  readonly roles: RoleStore;
  readonly apiKeys: APIKeyStore;
  readonly sessionKey: SessionKey;
  /** Second factors (docs/second-factors.md): TOTP in a Secret per user, Passkey CRs, UsedChallenge CRs. */
  readonly totp: TotpSecrets;
  readonly passkeys: PasskeyStore;
  readonly usedChallenges: UsedChallenges;
  private readonly log: Logger;
  /** OpenID Connect providers users sign in with (their client secrets in owned Secrets). */
  readonly oauthProviders: OAuthProviderStore;
  /** Kite's general settings (password login among them) and the global sidebar layout. */
  readonly generalSettings: GeneralSettingStore;
  /** The LDAP directory: an LDAPSetting, else the environment's (KITELINE_LDAP_*). */
  readonly ldapSettings: LdapSettingStore;
  private readonly backfill: IdBackfill;
  private readonly hasher: PlainPasswordHasher;
  private readonly expiredKeys: ExpiredKeySweeper;
  private readonly host: HostStore;

  constructor(
    host: HostStore,
    config: Pick<Config, 'passwordHashConcurrency' | 'expiredKeyRetentionSeconds' | 'ldap' | 'ldapTiming'>,
    log: Logger,
  ) {
    limitPasswordHashing(config.passwordHashConcurrency);
    const ids = new IdAllocator(host.core, host.namespace);
    const users = new UserStore(host, ids, ADMIN_ROLE);
    // Keys name roles and roles are taken from keys when deleted: the lookup is late-bound.
    const apiKeys: APIKeyStore = new APIKeyStore(
      host,
      ids,
      users,
      (name: string): boolean => roles.byName(name) !== undefined,
    );
    const roles: RoleStore = new RoleStore(host, ids, log, { users, apiKeys });
    this.users = users;
    this.roles = roles;
    this.apiKeys = apiKeys;
    this.sessionKey = new SessionKey(host);
    this.totp = new TotpSecrets(host);
    this.passkeys = new PasskeyStore(host);
    this.usedChallenges = new UsedChallenges(host);
    this.log = log;
    this.oauthProviders = new OAuthProviderStore(host, ids);
    this.generalSettings = new GeneralSettingStore(host, () => this.signInWithoutPassword());
    this.ldapSettings = new LdapSettingStore(
      host,
      config.ldap,
      config.ldapTiming,
      () =>
        this.generalSettings.passwordLoginDisabled() && this.oauthProviders.enabled().length === 0
          ? 'LDAP cannot be turned off while password login is disabled and no OAuth provider is enabled: ' +
            'nobody could sign in'
          : undefined,
      log,
    );
    this.host = host;
    this.backfill = new IdBackfill(ids, log, [users, roles, apiKeys, this.oauthProviders]);
    this.hasher = new PlainPasswordHasher(host, log);
    this.expiredKeys = new ExpiredKeySweeper(host, apiKeys, config.expiredKeyRetentionSeconds * 1000, log);
  }

  /** A value of a Secret in the install namespace (from the cache), e.g. the LDAP service password. */
  installSecret(name: string, key: string): string | undefined {
    return secretValue(this.host.secrets.get(name, this.host.namespace), key);
  }

  /**
   * Where users' groups can come from now: "ldap" when a directory is configured, and every
   * OAuthProvider (enabled or not: its users exist). Group subjects name one of them.
   */
  groupSources(): string[] {
    const providers = this.oauthProviders.list().map(providerName);
    return this.ldapSettings.directory() ? [...providers, LDAP_SOURCE] : providers;
  }

  /** Someone can sign in without a password: an enabled OAuth provider, or an LDAP directory. */
  signInWithoutPassword(): boolean {
    return this.oauthProviders.enabled().length > 0 || this.ldapSettings.directory() !== undefined;
  }

  /**
   * Calls `listener` on every change the identity caches see: users, roles, API keys, OAuth
   * providers, the LDAP setting and the Secrets beside them (password and key hashes, the session key), whoever wrote
   * it. Returns the unsubscription.
   */
  onChange(listener: () => void): () => void {
    const { users, roles, apiKeys, oauthProviders, ldapSettings, secrets } = this.host;
    const caches = [users, roles, apiKeys, oauthProviders, ldapSettings, secrets] as Array<
      WatchedCache<KubernetesObject>
    >;
    for (const cache of caches) for (const verb of INFORMER_EVENTS) cache.on(verb, listener);
    return () => {
      for (const cache of caches) for (const verb of INFORMER_EVENTS) cache.off(verb, listener);
    };
  }

  /**
   * After the host caches synced: the session key, the built-in roles, the migration of bare group
   * assignments (group-subjects.ts), the reconcilers.
   */
  async start(): Promise<void> {
    await this.sessionKey.ensure();
    await this.roles.ensureBuiltins();
    await this.roles.scopeBareGroups(this.groupSources());
    this.backfill.start();
    this.hasher.start();
    this.expiredKeys.start();
    this.usedChallenges.start((err) => this.log.warn({ err }, 'deleting expired used challenges failed'));
  }

  stop(): void {
    this.backfill.stop();
    this.hasher.stop();
    this.expiredKeys.stop();
    this.usedChallenges.stop();
  }
}
