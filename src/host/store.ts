// The host store: watch-backed caches of kiteline's custom resources and Secrets in the install
// namespace, plus the typed API clients used for writes. Reads on the request path come from
// these caches only; nothing on that path makes a host-cluster round trip.
import * as k8s from '@kubernetes/client-node';
import type { Logger } from '../log.js';
import { customResourceSource, secretSource, WatchedCache } from './informer.js';
import { apiStatus, isAlreadyExists, translateHostError } from './host-errors.js';
import { hostApiClient } from './kube.js';
import type {
  APIKeyResource,
  ClusterResource,
  GeneralSettingResource,
  LdapSettingResource,
  OAuthProviderResource,
  PasskeyResource,
  RoleResource,
  UserResource,
} from './resources.js';

export class HostStore {
  readonly users: WatchedCache<UserResource>;
  readonly clusters: WatchedCache<ClusterResource>;
  readonly roles: WatchedCache<RoleResource>;
  readonly apiKeys: WatchedCache<APIKeyResource>;
  readonly oauthProviders: WatchedCache<OAuthProviderResource>;
  /** The settings (one object each): Kite's general settings, the LDAP directory. */
  readonly generalSettings: WatchedCache<GeneralSettingResource>;
  readonly ldapSettings: WatchedCache<LdapSettingResource>;
  /** Users' passkeys (second factors): read on every sign-in and step-up status, written rarely. */
  readonly passkeys: WatchedCache<PasskeyResource>;
  readonly secrets: WatchedCache<k8s.V1Secret>;
  readonly customObjects: k8s.CustomObjectsApi;
  readonly core: k8s.CoreV1Api;

  constructor(
    readonly kc: k8s.KubeConfig,
    readonly namespace: string,
    private readonly log: Logger,
  ) {
    this.customObjects = hostApiClient(kc, k8s.CustomObjectsApi, log);
    this.core = hostApiClient(kc, k8s.CoreV1Api, log);
    this.users = new WatchedCache(kc, customResourceSource<UserResource>(kc, namespace, 'users'), log);
    this.clusters = new WatchedCache(kc, customResourceSource<ClusterResource>(kc, namespace, 'clusters'), log);
    this.roles = new WatchedCache(kc, customResourceSource<RoleResource>(kc, namespace, 'roles'), log);
    this.apiKeys = new WatchedCache(kc, customResourceSource<APIKeyResource>(kc, namespace, 'apikeys'), log);
    this.oauthProviders = new WatchedCache(
      kc,
      customResourceSource<OAuthProviderResource>(kc, namespace, 'oauthproviders'),
      log,
    );
    this.generalSettings = new WatchedCache(
      kc,
      customResourceSource<GeneralSettingResource>(kc, namespace, 'generalsettings'),
      log,
    );
    this.ldapSettings = new WatchedCache(
      kc,
      customResourceSource<LdapSettingResource>(kc, namespace, 'ldapsettings'),
      log,
    );
    this.passkeys = new WatchedCache(kc, customResourceSource<PasskeyResource>(kc, namespace, 'passkeys'), log);
    this.secrets = new WatchedCache(kc, secretSource(kc, namespace), log);
  }

  private get caches() {
    return [
      this.users,
      this.clusters,
      this.roles,
      this.apiKeys,
      this.oauthProviders,
      this.generalSettings,
      this.ldapSettings,
      this.passkeys,
      this.secrets,
    ];
  }

  /** Creates the install namespace when allowed, then loads every cache. */
  async start(): Promise<void> {
    await this.ensureNamespace();
    await Promise.all(this.caches.map((c) => c.start()));
    this.log.info({ namespace: this.namespace }, 'host caches synced');
  }

  get synced(): boolean {
    return this.caches.every((c) => c.isSynced);
  }

  async stop(): Promise<void> {
    await Promise.all(this.caches.map((c) => c.stop()));
  }

  private async ensureNamespace(): Promise<void> {
    // The one host call whose 403 is expected (a pod's service account need not read
    // namespaces): made untranslated, so it logs no RBAC error.
    const core = this.kc.makeApiClient(k8s.CoreV1Api);
    try {
      await core.readNamespace({ name: this.namespace });
    } catch (err) {
      if (apiStatus(err) === 403) return;
      if (apiStatus(err) !== 404) throw translateHostError(err, `read namespace ${this.namespace}`, this.log);
      try {
        await this.core.createNamespace({ body: { metadata: { name: this.namespace } } });
      } catch (createErr) {
        if (!isAlreadyExists(createErr)) throw createErr;
      }
    }
  }
}
