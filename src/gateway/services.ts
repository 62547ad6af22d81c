// What the gateway's routes may use: one object built at start-up (server.ts) and handed to
// buildApp. Routes never reach past it into globals.
import type { AuditService } from '../audit/audit-service.js';
import type { ClusterManager } from '../clusters/manager.js';
import type { ClusterDirectory } from '../clusters/types.js';
import type { ClusterStore } from '../host/clusters.js';
import type { AuthService } from '../auth/auth-service.js';
import type { OidcSignIn } from '../auth/oidc.js';
import type { OpenStreams } from '../auth/open-streams.js';
import type { SecondFactors } from '../auth/second-factors.js';
import type { Config } from '../config.js';
import type { APIKeyStore } from '../host/apikeys.js';
import type { GeneralSettingStore } from '../host/general-setting.js';
import type { LdapSettingStore } from '../host/ldap-setting.js';
import type { OAuthProviderStore } from '../host/oauth-providers.js';
import type { RoleStore } from '../host/roles.js';
import type { HostStore } from '../host/store.js';
import type { TemplateStore } from '../host/templates.js';
import type { ChartRepositoryStore } from '../host/chart-repositories.js';
import type { HelmOperations } from '../helm/operations.js';
import type { UserStore } from '../host/users.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics/metrics.js';
import type { HostGuard } from '../cluster-access/host-guard.js';
import type { SearchIndexes } from '../tools/search-index.js';
import type { Recordings } from '../recording/recordings.js';
import type { ReadCache } from '../resources/cache/read-cache.js';
import type { HttpsEndpoint } from './https.js';

export interface Services {
  config: Config;
  log: Logger;
  host: HostStore;
  /** Who is calling and what they may do: sessions, API keys, roles (cache-only reads). */
  auth: AuthService;
  /** The user store: users, their passwords and roles, the last-admin rule (host/users.ts). */
  users: UserStore;
  /** The role store: roles, built-in roles, assignments (host/roles.ts). */
  roles: RoleStore;
  /** The API key store: admin keys and kubeconfig tokens (host/apikeys.ts). */
  apiKeys: APIKeyStore;
  /** OpenID Connect providers (host/oauth-providers.ts). */
  oauthProviders: OAuthProviderStore;
  /** Kite's general settings: AI, kubectl console, password login, the global sidebar (host/general-setting.ts). */
  generalSettings: GeneralSettingStore;
  /** The LDAP directory configured from Kite's UI or kubectl, else the environment's (host/ldap-setting.ts). */
  ldapSettings: LdapSettingStore;
  /** Resource templates (host/templates.ts; read from the API server, not a cache: it says why). */
  templates: TemplateStore;
  /** Helm chart repositories (host/chart-repositories.ts; read from the API server, like templates). */
  chartRepositories: ChartRepositoryStore;
  /** Helm release writes and chart reads through the real helm (src/helm/, docs/helm.md). */
  helm: HelmOperations;
  /** TOTP and passkeys: enrolment, sign-in and step-up (auth/second-factors.ts, docs/second-factors.md). */
  secondFactors: SecondFactors;
  /** Sign-in with an OpenID Connect provider: the authorization URL, the callback (auth/oidc.ts). */
  oidc: OidcSignIn;
  /** This replica's warm cluster connections (kept current by the reconciler): resource routes. */
  clusters: ClusterDirectory;
  /** Registered clusters: their admin writes, rules, import and views (host/clusters.ts). */
  clusterStore: ClusterStore;
  /** The clusters part's life cycle: the reconciler and the leader lease. */
  clusterManager: ClusterManager;
  /** This gateway's Prometheus metrics (its own registry). */
  metrics: Metrics;
  /** Keeps kiteline's own namespace and API group on the host cluster out of the resource routes. */
  hostGuard: HostGuard;
  /** Audits an action: the `audit` log line and the durable audit trail (src/audit/). */
  audit: AuditService;
  /** Each cluster's search index, started by the first search and stopped when idle (tools/search-index.ts). */
  searchIndexes: SearchIndexes;
  /** Recording of terminal, exec and attach sessions, and their search and replay (src/recording/). */
  recordings: Recordings;
  /** Cached GETs and LISTs (docs/read-cache.md). */
  readCache: ReadCache;
  /** This replica's open long-lived streams, ended when their caller's credentials are revoked. */
  openStreams: OpenStreams;
  /** The https listener, when one is configured (`--tls-port`): kubeconfigs point there. */
  https?: HttpsEndpoint;
}
