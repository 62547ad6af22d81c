// `kiteline serve`: connects to the host cluster, installs CRDs, loads the host caches and serves
// the gateway. Returns a handle so tests can run several replicas in one process.
import type { FastifyInstance } from 'fastify';
import { AuthService } from './auth/auth-service.js';
import { LdapAuthenticator } from './auth/ldap.js';
import { LdapRecheck } from './auth/ldap-recheck.js';
import { RolelessUserSweeper } from './auth/roleless-users.js';
import { SecondFactors } from './auth/second-factors.js';
import { OidcSignIn } from './auth/oidc.js';
import { OpenStreams } from './auth/open-streams.js';
import { buildAuditService } from './audit/setup.js';
import { Recordings } from './recording/recordings.js';
import { ReadCache } from './resources/cache/read-cache.js';
import { TemplateStore } from './host/templates.js';
import { ChartRepositoryStore } from './host/chart-repositories.js';
import { HelmOperations } from './helm/operations.js';
import { ClusterManager } from './clusters/manager.js';
import type { Config } from './config.js';
import { buildApp } from './gateway/app.js';
import { LazySchemas } from './gateway/lazy-schemas.js';
import { httpsListener } from './gateway/https.js';
import type { Services } from './gateway/services.js';
import { ensureCrds } from './host/crds.js';
import { IdentityStores } from './host/identity-stores.js';
import { loadHostKubeConfig } from './host/kube.js';
import { HostStore } from './host/store.js';
import { createLogger, type Logger } from './log.js';
import { Metrics } from './metrics/metrics.js';
import { metricsSources } from './metrics/sources.js';
import { HostGuard } from './cluster-access/host-guard.js';
import { SearchIndexes } from './tools/search-index.js';

export interface RunningServer {
  app: FastifyInstance;
  services: Services;
  /** The address the gateway listens on, e.g. http://127.0.0.1:8080. */
  url: string;
  close(): Promise<void>;
  /**
   * A pod's graceful stop: for delayMs every answer closes its connection, so clients' kept-alive
   * connections leave this replica while the Service stops sending new ones here; then close():
   * requests in flight finish and the leader lease is released.
   */
  drainAndClose(delayMs: number): Promise<void>;
  /**
   * Settles once every route's schema is compiled, after the server listens (gateway/lazy-schemas.ts);
   * rejects with a schema that does not compile (it is also logged).
   */
  schemasCompiled: Promise<void>;
}

export async function startServer(config: Config, log: Logger = createLogger(config.logLevel)): Promise<RunningServer> {
  const kc = loadHostKubeConfig(config);
  // The CRDs are checked (and installed) while the gateway is put together; the host caches wait
  // for them. (The catch only keeps an early failure from counting as unhandled: it is awaited.)
  const crdsReady = ensureCrds(kc, config.crdDir, config.installCrds, log);
  crdsReady.catch(() => undefined);
  const host = new HostStore(kc, config.namespace, log);
  const clusterManager = new ClusterManager(host, config, log);
  const identity = new IdentityStores(host, config, log);
  // The directory in force is read at each use: an LDAPSetting's changes hold without a restart.
  const ldap = new LdapAuthenticator(
    () => identity.ldapSettings.directory(),
    (secret) => identity.installSecret(secret, 'password'),
  );
  const auth = new AuthService(identity, config, log, ldap, (name) => clusterManager.registry.get(name)?.stepUpMinutes);
  const ldapRecheck = new LdapRecheck(
    ldap,
    identity.users,
    config.ldapTiming.recheckIntervalMs,
    () => clusterManager.lease.isLeader,
    log,
  );
  const rolelessUsers = new RolelessUserSweeper(
    identity.users,
    identity.roles,
    (user) => auth.holdsAnyRole(user),
    config.rolelessUserTtlSeconds * 1000,
    log,
  );
  // The internal hop's signatures derive from the session key, which every replica reads.
  clusterManager.fleet.useKey(() => identity.sessionKey.current());
  const oidc = new OidcSignIn(identity.oauthProviders, () => identity.sessionKey.current(), log);
  const metrics = new Metrics(metricsSources(host, clusterManager.store, () => clusterManager.fleetSummary()));
  clusterManager.registry.observeUpstream(metrics.observeUpstream);
  // Open streams are checked again on every change of the identity caches (any writer, any replica).
  const openStreams = new OpenStreams(auth, log, (reason) => metrics.streamRevoked(reason));
  const stopWatchingIdentity = identity.onChange(() => openStreams.identityChanged());
  const hostGuard = new HostGuard(
    config.namespace,
    async () => (await host.core.readNamespace({ name: 'kube-system' })).metadata?.uid,
  );
  const audit = buildAuditService(kc, host, config, identity, () => clusterManager.lease.isLeader, log);
  const recordings = new Recordings(
    kc,
    config.namespace,
    config.replicaId,
    config.sessionRecording,
    () => clusterManager.lease.isLeader,
    log,
    metrics.recording,
  );
  const readCache = new ReadCache(config.readCache, hostGuard, metrics.readCache, log);
  metrics.readCacheHeld = () => readCache.held();
  const services: Services = {
    config,
    log,
    host,
    auth,
    users: identity.users,
    roles: identity.roles,
    apiKeys: identity.apiKeys,
    oauthProviders: identity.oauthProviders,
    generalSettings: identity.generalSettings,
    ldapSettings: identity.ldapSettings,
    templates: new TemplateStore(host),
    chartRepositories: new ChartRepositoryStore(host),
    helm: new HelmOperations(config.helm),
    oidc,
    secondFactors: new SecondFactors(identity, auth),
    clusters: clusterManager.registry,
    clusterStore: clusterManager.store,
    clusterManager,
    metrics,
    hostGuard,
    audit,
    recordings,
    readCache,
    searchIndexes: new SearchIndexes({ hostGuard, log }),
    openStreams,
  };
  const schemas = new LazySchemas();
  const app = await buildApp(services, schemas);
  let draining = false;
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (draining) reply.header('connection', 'close');
    done(null, payload);
  });
  await crdsReady;
  await host.start();
  await identity.start();
  ldapRecheck.start();
  rolelessUsers.start();
  await audit.trail?.start();
  await recordings.start();
  const url = await app.listen({ host: config.host, port: config.port });
  log.info({ url, namespace: config.namespace, replica: config.replicaId }, 'kiteline gateway listening');
  const schemasCompiled = schemas.compileRest();
  schemasCompiled.catch((err: unknown) => log.fatal({ err }, 'a route schema does not compile'));
  // Clusters are connected once this replica has joined the fleet: it connects only the ones it
  // holds (docs/fleet.md). The others reach its hop at the peer URL (a pod's IP), else this address.
  await clusterManager.joinFleet(config.peerUrl ?? url);
  clusterManager.start();
  const https = config.tls ? httpsListener(app.server, config.tls, config.host) : undefined;
  if (https) {
    services.https = https.endpoint;
    log.info(
      { url: await https.listen(config.host), selfSigned: https.endpoint.trustPem !== undefined },
      'kiteline gateway listening (https)',
    );
  }

  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    // First the fleet: the others take this replica's clusters while its requests finish.
    await clusterManager.leaveFleet();
    // Requests in flight get STREAMS_CLOSED_AFTER_MS to finish; streams that never end by
    // themselves (watches, followed logs, live pod lists) are then cut, so a rollout never waits
    // out the pod's grace period. Their clients reconnect to another replica.
    // (The https listener hands its connections to the same http server.)
    const cutStreams = setTimeout(() => app.server.closeAllConnections(), STREAMS_CLOSED_AFTER_MS);
    cutStreams.unref();
    try {
      await Promise.all([https?.close(), app.close()]);
    } finally {
      clearTimeout(cutStreams);
    }
    // After the last request: its audit record (and the summary of unauthenticated ones left out)
    // is in the final flush.
    audit.close();
    readCache.close();
    await Promise.all([audit.trail?.close(), recordings.close()]);
    stopWatchingIdentity();
    openStreams.stop();
    services.searchIndexes.stopAll();
    identity.stop();
    ldapRecheck.stop();
    rolelessUsers.stop();
    await clusterManager.stop();
    await host.stop();
  };
  return {
    app,
    services,
    url,
    close,
    schemasCompiled,
    async drainAndClose(delayMs) {
      draining = true;
      // The others take this replica's clusters first, so no hop to it is cut when it closes.
      await clusterManager.leaveFleet();
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      await close();
    },
  };
}

/** How long a shutting-down gateway lets open requests finish before it closes the rest. */
const STREAMS_CLOSED_AFTER_MS = 5_000;

/** What a person should do next on a fresh install, printed by `kiteline serve`. */
export function nextStepHint(url: string): string {
  return [
    '',
    'kiteline is ready. Create the first super user:',
    `  curl -s -X POST ${url}/api/v1/admin/users/create_super_user \\`,
    `    -H 'content-type: application/json' -d '{"username":"admin","password":"change-me-now","name":"Admin"}'`,
    '',
  ].join('\n');
}
