// Helm releases and charts, in Kite's shapes (docs/helm.md):
//   GET       /api/v1/helmrelease/:namespace                  HelmReleaseList of a namespace (`_all`: every one)
//   GET       /api/v1/helmrelease/:namespace/:name            one HelmRelease with values, manifest, notes (?revision=)
//   GET       /api/v1/helmrelease/:namespace/:name/history    {items}: its revisions, newest first (`helm history`)
//   POST      /api/v1/helmrelease/:namespace                  install {name, repository, chart, version?, values?}
//   PUT|POST  /api/v1/helmrelease/:namespace/:name/upgrade    upgrade {repository, chart, version?, values?, ...}
//   PUT|POST  /api/v1/helmrelease/:namespace/:name/rollback   rollback {revision?}
//   DELETE    /api/v1/helmrelease/:namespace/:name            uninstall (?keepHistory=true)
//   GET       /api/v1/charts                                  {items, total}: charts of every repository
//   GET       /api/v1/charts/:repository/:chart/versions      a chart's versions, newest first
//   GET       /api/v1/charts/:repository/:chart/values        its default values (also .../content/values)
//   GET       /api/v1/chart-repositories                      the repositories (also /api/v1/charts/repositories)
//   /api/v1/admin/chart-repositories[/:name]                  admins: create, change, delete
// Reads are Helm's release Secrets read as the caller (helm/releases.ts): `list` on secrets of the
// namespace. Writes run the real helm (helm/operations.ts) with a kubeconfig for this one cluster
// pointing at kiteline's own Kubernetes API on this replica (a loopback https listener), its token
// minted for the signed-in user like a kubectl console's (one cluster, the user's roles, revoked
// when helm ends): everything helm does is the user's, authorized and audited call by call. Before
// helm starts, the route checks what Helm's storage does with the release Secrets (the verbs
// below) and the host guard, so a refusal is a plain 403 without a helm run. Helm runs are bounded
// per user and per replica, writes and chart reads in separate pools (429).
import { parseDocument } from 'yaml';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { Principal, Verb } from '../../auth/principal.js';
import { requireAccess } from '../../cluster-access/access.js';
import { resolveTarget } from '../../cluster-access/reads.js';
import { NAMESPACE_PATTERN } from '../../cluster-access/segments.js';
import { kubeconfigYaml } from '../../credentials/kubeconfig-document.js';
import {
  BadRequestError,
  ForbiddenError,
  NotFoundError,
  ServiceUnavailableError,
  TooManyRequestsError,
} from '../../errors.js';
import type { ChartChoice, ReleaseWrite } from '../../helm/operations.js';
import { historyItem, listReleases, readRelease, releaseHistory, releaseView } from '../../helm/releases.js';
import type { ChartRepositoryResource, ChartRepositorySpec } from '../../host/chart-repositories.js';
import { isOciRepository } from '../../host/chart-repositories.js';
import { ignoreGone } from '../../host/kind-store.js';
import { PROXY_PREFIX } from '../../proxy/proxy-url.js';
import { ClusterQuery, bothSlashes, clusterSchemaOf, objectOf, schemaOf, type App } from '../schemas.js';
import { HeldCounts } from '../held-counts.js';
import { httpsListener, type HttpsListener } from '../https.js';
import { toolRequest, withClientSignal, type ToolRequest } from '../tool-request.js';

const RELEASES = '/api/v1/helmrelease';
const ADMIN_REPOSITORIES = '/api/v1/admin/chart-repositories';
const clusterSchema = clusterSchemaOf('helm');
const schema = schemaOf('helm');

/** Helm runs one user may have going at once, and one replica. */
export const HELM_RUNS_PER_USER = 2;
export const HELM_RUNS_PER_REPLICA = 8;

const string = Type.String();
/** Helm's release names: DNS-1123 labels of at most 53 characters. */
const RELEASE_NAME = '^[a-z0-9]([-a-z0-9]{0,51}[a-z0-9])?$';
const REPOSITORY_NAME = '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$';
const CHART_NAME = '^[a-z0-9]([-a-z0-9._]{0,126}[a-z0-9])?$';
const VERSION = '^[0-9A-Za-z][0-9A-Za-z.+_-]{0,127}$';
/**
 * What Helm's storage does with release Secrets, checked before helm runs: an install reads the
 * name's revisions and creates one; an upgrade or rollback also supersedes the deployed one and
 * prunes beyond the history limit; an uninstall reads and deletes them (`keepHistory`: updates).
 */
const INSTALL_VERBS: readonly Verb[] = ['get', 'list', 'create'];
const CHANGE_VERBS: readonly Verb[] = ['get', 'list', 'create', 'update', 'delete'];
const UNINSTALL_VERBS: readonly Verb[] = ['get', 'list', 'delete'];
/** Values (YAML text) at most. */
export const MAX_VALUES_BYTES = 512 * 1024;

const NamespaceParams = Type.Object({
  namespace: Type.String({ maxLength: 63, pattern: NAMESPACE_PATTERN, description: 'a namespace, or `_all`' }),
});
const ReleaseParams = Type.Object({
  namespace: Type.String({ maxLength: 63, pattern: NAMESPACE_PATTERN }),
  name: Type.String({ maxLength: 53, pattern: RELEASE_NAME, description: "the release's name" }),
});
const ChartParams = Type.Object({
  repository: Type.String({ maxLength: 63, pattern: REPOSITORY_NAME }),
  chart: Type.String({ maxLength: 128, pattern: CHART_NAME }),
});

const times = {
  firstDeployed: Type.Optional(string),
  lastDeployed: Type.Optional(Type.String({ description: 'when this revision was deployed' })),
  deleted: Type.Optional(string),
};
const chartColumns = {
  chart: Type.String({ description: '<chart>-<version>, as `helm list` prints it' }),
  chartName: string,
  chartVersion: string,
  appVersion: string,
};
const anyValues = (description: string) => Type.Record(string, Type.Unknown(), { description });
const HelmRelease = objectOf(
  {
    apiVersion: Type.Literal('v1'),
    kind: Type.Literal('HelmRelease'),
    metadata: objectOf({ name: string, namespace: string, creationTimestamp: Type.Optional(string) }),
    spec: objectOf({
      releaseName: string,
      namespace: string,
      ...chartColumns,
      icon: Type.Optional(string),
      revision: Type.Integer(),
      description: string,
      values: Type.Optional(anyValues('detail only: the values the user supplied (`helm get values`)')),
      defaultValues: Type.Optional(anyValues("detail only: the chart's own values")),
      manifest: Type.Optional(Type.String({ description: 'detail only: the rendered manifest (`helm get manifest`)' })),
      notes: Type.Optional(string),
      hooks: Type.Optional(Type.Array(objectOf({ name: string, kind: string, events: Type.Array(string) }))),
    }),
    status: objectOf({
      status: Type.String({ description: 'deployed, failed, pending-install, pending-upgrade, superseded, ...' }),
      ...times,
    }),
  },
  "A Helm release (its newest revision, or the one asked for), in Kite's shape",
);
const HelmReleaseList = objectOf({
  apiVersion: Type.Literal('v1'),
  kind: Type.Literal('HelmReleaseList'),
  items: Type.Array(HelmRelease),
});
const HistoryItem = objectOf(
  { revision: Type.Integer(), status: string, ...chartColumns, description: string, ...times },
  'A revision of a release, as `helm history` shows it',
);
const Chart = objectOf(
  {
    repository: string,
    name: string,
    version: Type.String({ description: 'the newest version (empty for OCI repositories: ask for its versions)' }),
    appVersion: string,
    description: string,
    icon: string,
  },
  'A chart a repository offers',
);
const ChartVersion = objectOf({ version: string, appVersion: string, description: string, created: string });
const Repository = objectOf(
  {
    name: string,
    url: string,
    type: Type.Union([Type.Literal('http'), Type.Literal('oci')]),
    description: string,
    charts: Type.Array(string, { description: 'OCI repositories: the charts under the path' }),
    plainHttp: Type.Boolean(),
    hasCredentials: Type.Boolean(),
  },
  'A chart repository (never its credentials)',
);

const values = Type.String({ maxLength: MAX_VALUES_BYTES, description: 'values, YAML text (as a values file)' });
const runOptions = {
  timeoutSeconds: Type.Optional(
    Type.Integer({ minimum: 1, maximum: 3600, description: "Helm's --timeout (default 300; at most the configured)" }),
  ),
  wait: Type.Optional(Type.Boolean({ description: 'wait until the resources are ready (default false: hooks only)' })),
};
const chartChoice = {
  repository: Type.String({ maxLength: 63, pattern: REPOSITORY_NAME }),
  chart: Type.String({ maxLength: 128, pattern: CHART_NAME }),
  version: Type.Optional(Type.String({ maxLength: 128, pattern: VERSION, description: 'default: the newest' })),
  values: Type.Optional(values),
};
const InstallBody = Type.Object(
  { name: Type.String({ maxLength: 53, pattern: RELEASE_NAME }), ...chartChoice, ...runOptions },
  { additionalProperties: false },
);
const UpgradeBody = Type.Object(
  {
    ...chartChoice,
    reuseValues: Type.Optional(Type.Boolean({ description: "on top of the release's current values" })),
    ...runOptions,
  },
  { additionalProperties: false },
);
const RollbackBody = Type.Object(
  { revision: Type.Optional(Type.Integer({ minimum: 1, description: 'default: the previous one' })), ...runOptions },
  { additionalProperties: false },
);
const UninstallQuery = Type.Object({
  ...ClusterQuery.properties,
  keepHistory: Type.Optional(Type.Boolean({ description: 'keep the revisions, marked uninstalled' })),
  timeoutSeconds: runOptions.timeoutSeconds,
});
const DetailQuery = Type.Object({ ...ClusterQuery.properties, revision: Type.Optional(Type.Integer({ minimum: 1 })) });
const ChartsQuery = Type.Object({
  q: Type.Optional(Type.String({ maxLength: 128, description: 'part of the chart name' })),
  repository: Type.Optional(Type.String({ maxLength: 63, pattern: REPOSITORY_NAME })),
});
const VersionQuery = Type.Object({ version: Type.Optional(Type.String({ maxLength: 128, pattern: VERSION })) });

const repositoryUrl = Type.String({
  maxLength: 2048,
  pattern: '^(https?|oci)://[^\\s]+$',
  description: 'https://… (index.yaml below it) or oci://host[:port]/path',
});
const credentials = {
  username: Type.Optional(Type.String({ minLength: 1, maxLength: 253 })),
  password: Type.Optional(Type.String({ maxLength: 4096 })),
};
const repositoryOptions = {
  description: Type.Optional(Type.String({ maxLength: 1024 })),
  charts: Type.Optional(Type.Array(Type.String({ pattern: CHART_NAME, maxLength: 128 }), { maxItems: 500 })),
  plainHttp: Type.Optional(Type.Boolean()),
};
const NewRepositoryBody = Type.Object(
  {
    name: Type.String({ pattern: REPOSITORY_NAME, maxLength: 63 }),
    url: repositoryUrl,
    ...repositoryOptions,
    ...credentials,
  },
  { additionalProperties: false },
);
const RepositoryChangeBody = Type.Object(
  {
    url: Type.Optional(repositoryUrl),
    ...repositoryOptions,
    ...credentials,
    clearCredentials: Type.Optional(Type.Boolean({ description: 'remove the stored credentials' })),
  },
  { additionalProperties: false },
);
const RepositoryParams = Type.Object({ name: Type.String({ pattern: REPOSITORY_NAME, maxLength: 63 }) });

function repositoryView(repository: ChartRepositoryResource) {
  const { spec } = repository;
  return {
    name: spec.name,
    url: spec.url,
    type: isOciRepository(spec) ? ('oci' as const) : ('http' as const),
    description: spec.description ?? '',
    charts: spec.charts ?? [],
    plainHttp: spec.plainHttp === true,
    hasCredentials: spec.credentialsSecretRef !== undefined,
  };
}

/** 400 for what the URL scheme rules out (charts for an http repository, a path-less OCI URL). */
function checkRepository(spec: Pick<ChartRepositorySpec, 'url' | 'charts' | 'plainHttp'>): void {
  let url: URL;
  try {
    url = new URL(spec.url);
  } catch {
    throw new BadRequestError(`url: not a URL: ${spec.url}`);
  }
  if (url.username || url.password) throw new BadRequestError('url: put credentials in username and password');
  if (url.protocol !== 'oci:' && (spec.charts?.length || spec.plainHttp))
    throw new BadRequestError('charts and plainHttp are for oci:// repositories');
}

/** The namespace of a write: one namespace, never `_all`. */
function writeNamespace(namespace: string): string {
  if (namespace === '_all') throw new BadRequestError('a release lives in one namespace: name it');
  return namespace;
}

/** The values text: 400 unless it is YAML of a mapping (or empty). */
function checkedValues(text: string | undefined): string | undefined {
  if (text === undefined || text.trim() === '') return undefined;
  const doc = parseDocument(text);
  if (doc.errors.length) throw new BadRequestError(`values: not YAML: ${doc.errors[0].message.split('\n')[0]}`);
  const parsed: unknown = doc.toJS();
  if (parsed !== null && (typeof parsed !== 'object' || Array.isArray(parsed)))
    throw new BadRequestError('values: must be a YAML mapping');
  return text;
}

/**
 * A loopback https listener of this replica's own server, for the helm runs on this machine: Helm
 * (client-go) sends a bearer token only over https. Self-signed for 127.0.0.1, its certificate the
 * kubeconfig's CA; started with the first run, closed with the app.
 */
function loopbackListener(app: FastifyInstance): () => Promise<{ url: string; caPem: string | undefined }> {
  let started: Promise<{ url: string; caPem: string | undefined }> | undefined;
  let listener: HttpsListener | undefined;
  app.addHook('onClose', async () => listener?.close());
  return () =>
    (started ??= (async () => {
      listener = httpsListener(app.server, { port: 0, certFile: undefined, keyFile: undefined }, '127.0.0.1');
      const url = await listener.listen('127.0.0.1');
      return { url: `${url}${app.services.config.basePath}`, caPem: listener.endpoint.trustPem };
    })().catch((err: unknown) => {
      started = undefined; // the next run tries again
      throw err;
    }));
}

export default async function helmRoutes(app: App) {
  const { services } = app;
  const loopback = loopbackListener(app);
  // Helm runs held, by caller and in all (key `*`): writes and chart reads (`helm show values`) in
  // pools of their own, so readers never crowd out writes.
  const pools = { write: new HeldCounts(), read: new HeldCounts() };

  /** Holds one of the caller's helm runs of a pool (429 beyond the limits); the release function. */
  function holdRun(principal: Principal, kind: keyof typeof pools): () => void {
    const pool = pools[kind];
    const key = `${principal.kind}:${principal.id}`;
    if (pool.count(key) >= HELM_RUNS_PER_USER || pool.count('*') >= HELM_RUNS_PER_REPLICA)
      throw new TooManyRequestsError('too many Helm operations at once; try again when one has finished', 5);
    const [mine, here] = [pool.hold(key), pool.hold('*')];
    return () => {
      mine();
      here();
    };
  }

  /** The repository and chart a body or path names, with the repository's credentials. */
  async function chartChoice(repository: string, chart: string, version?: string): Promise<ChartChoice> {
    const found = await services.chartRepositories.byName(repository);
    // An OCI repository's list is what it offers: no other chart under its path, with its credentials.
    if (isOciRepository(found.spec) && !(found.spec.charts ?? []).includes(chart))
      throw new NotFoundError(`chart ${chart} is not listed in chart repository ${repository}`);
    const creds = services.chartRepositories.credentials(found);
    return { repository: found, chart, ...(version ? { version } : {}), ...(creds ? { credentials: creds } : {}) };
  }

  /**
   * What a write needs before helm runs: a signed-in user, `verbs` on secrets of the namespace (where
   * Helm keeps the release) and the host guard's leave.
   */
  async function authorizeWrite(ctx: ToolRequest, namespace: string, verbs: readonly Verb[]) {
    if (ctx.principal.kind !== 'user')
      throw new ForbiddenError('Helm acts as a signed-in user (with a token of theirs): sign in, API keys cannot');
    const target = await resolveTarget(ctx, { resource: 'secrets', namespace, name: undefined });
    for (const verb of verbs) {
      requireAccess(services.auth, ctx.principal, ctx.conn.name, 'secrets', namespace, verb);
      await services.hostGuard.check(ctx.conn, { resolved: target.resolved, namespace, name: undefined, verb });
    }
  }

  /** The start of every write: the cluster and caller (a long-running slot), one namespace, the checks above. */
  async function startWrite(
    request: FastifyRequest & { params: { namespace: string } },
    reply: FastifyReply,
    signal: AbortSignal,
    verbs: readonly Verb[],
  ): Promise<{ ctx: ToolRequest; namespace: string }> {
    const ctx = await toolRequest(app, request, reply, signal, true);
    const namespace = writeNamespace(request.params.namespace);
    await authorizeWrite(ctx, namespace, verbs);
    return { ctx, namespace };
  }

  /**
   * Runs `operate` with a kubeconfig for the caller on this cluster: a one-cluster token of the
   * user's, usable once the authenticator's cache has it, revoked when helm ends.
   */
  async function asUser(
    request: FastifyRequest,
    ctx: ToolRequest,
    release: { namespace: string; name: string; timeoutSeconds?: number; wait?: boolean },
    operate: (write: ReleaseWrite) => Promise<void>,
  ): Promise<void> {
    const timeoutSeconds = Math.min(release.timeoutSeconds ?? 300, services.config.helm.maxTimeoutSeconds);
    const held = holdRun(ctx.principal, 'write');
    try {
      // Long enough for the chart's download (index and archive) and helm's own timeout.
      const downloads = Math.ceil((2 * services.config.helm.repositoryTimeoutMs) / 1000);
      const ttl = Math.min(timeoutSeconds + downloads + 120, services.config.kubeconfigTokenMaxTtlSeconds);
      const token = await services.apiKeys.createConsoleToken(ctx.principal, ctx.conn.name, ttl);
      try {
        // Usable once this replica's caches hold the key and its hash (a few milliseconds).
        const usable = () => 'principal' in services.auth.authenticateApiKey(token.key, 'kubernetes');
        for (let waited = 0; !usable(); waited += 50) {
          if (waited >= 10_000)
            throw new ServiceUnavailableError('the token for helm did not become usable: try again');
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        const { url, caPem } = await loopback();
        const kubeconfig = kubeconfigYaml({
          clusters: [{ name: ctx.conn.name, server: `${url}${PROXY_PREFIX}${encodeURIComponent(ctx.conn.name)}` }],
          caPem,
          userName: `kiteline-${ctx.principal.name}`,
          token: token.key,
          current: ctx.conn.name,
        });
        request.log.debug({ cluster: ctx.conn.name }, 'helm runs as the user');
        const { namespace, name } = release;
        // No client signal: a write goes on when the client leaves (helm stopped midway would leave the
        // release pending and every later write refused).
        await operate({ namespace, name, kubeconfig, timeoutSeconds, wait: release.wait === true });
      } finally {
        await services.apiKeys.delete(token.resource).catch(ignoreGone);
      }
    } finally {
      held();
    }
  }

  // ---- Releases: reads ----
  app.get(
    `${RELEASES}/:namespace`,
    {
      onRequest: app.requireUser,
      schema: clusterSchema('The Helm releases of a namespace (`_all`: of every namespace you may list Secrets in)', {
        params: NamespaceParams,
        querystring: ClusterQuery,
        response: { 200: HelmReleaseList },
      }),
    },
    withClientSignal(async (request, reply, signal) => {
      const ctx = await toolRequest(app, request, reply, signal);
      const { namespace } = request.params;
      const items = await listReleases(services, ctx, namespace === '_all' ? undefined : namespace);
      return { apiVersion: 'v1' as const, kind: 'HelmReleaseList' as const, items };
    }),
  );

  app.get(
    `${RELEASES}/:namespace/:name`,
    {
      onRequest: app.requireUser,
      schema: clusterSchema('A Helm release: its newest revision (or ?revision=), values, manifest and notes', {
        params: ReleaseParams,
        querystring: DetailQuery,
        response: { 200: HelmRelease },
      }),
    },
    withClientSignal(async (request, reply, signal) => {
      const ctx = await toolRequest(app, request, reply, signal);
      const { namespace, name } = request.params;
      return releaseView(
        await readRelease(services, ctx, writeNamespace(namespace), name, request.query.revision),
        true,
      );
    }),
  );

  app.get(
    `${RELEASES}/:namespace/:name/history`,
    {
      onRequest: app.requireUser,
      schema: clusterSchema("A Helm release's revisions, oldest first (`helm history`)", {
        params: ReleaseParams,
        querystring: ClusterQuery,
        response: { 200: objectOf({ items: Type.Array(HistoryItem) }) },
      }),
    },
    withClientSignal(async (request, reply, signal) => {
      const ctx = await toolRequest(app, request, reply, signal);
      const { namespace, name } = request.params;
      const history = await releaseHistory(services, ctx, writeNamespace(namespace), name);
      return { items: history.map(historyItem).reverse() };
    }),
  );

  // ---- Releases: writes, through helm ----
  app.post(
    `${RELEASES}/:namespace`,
    {
      onRequest: app.requireUser,
      schema: clusterSchema('Install a chart as a new release (helm install, as you)', {
        params: NamespaceParams,
        querystring: ClusterQuery,
        body: InstallBody,
        response: { 201: HelmRelease },
      }),
    },
    withClientSignal(async (request, reply, signal) => {
      const { ctx, namespace } = await startWrite(request, reply, signal, INSTALL_VERBS);
      const body = request.body;
      const valuesText = checkedValues(body.values);
      const choice = await chartChoice(body.repository, body.chart, body.version);
      await asUser(request, ctx, { ...body, namespace }, (write) => services.helm.install(write, choice, valuesText));
      reply.code(201);
      return releaseView(await readRelease(services, ctx, namespace, body.name), true);
    }),
  );

  const upgradeSchema = clusterSchema('Upgrade a release to a chart version and values (helm upgrade, as you)', {
    params: ReleaseParams,
    querystring: ClusterQuery,
    body: UpgradeBody,
    response: { 200: HelmRelease },
  });
  // PUT as Kite's newest UI sends it, POST as its first release did: the same route.
  for (const method of ['POST', 'PUT'] as const)
    app.route({
      method,
      url: `${RELEASES}/:namespace/:name/upgrade`,
      onRequest: app.requireUser,
      schema: upgradeSchema,
      handler: withClientSignal(async (request, reply, signal) => {
        const { ctx, namespace } = await startWrite(request, reply, signal, CHANGE_VERBS);
        const { name } = request.params;
        const body = request.body;
        await readRelease(services, ctx, namespace, name); // 404 before helm runs
        const valuesText = checkedValues(body.values);
        const choice = await chartChoice(body.repository, body.chart, body.version);
        await asUser(request, ctx, { ...body, namespace, name }, (write) =>
          services.helm.upgrade(write, choice, valuesText, body.reuseValues === true),
        );
        return releaseView(await readRelease(services, ctx, namespace, name), true);
      }),
    });

  const rollbackSchema = clusterSchema(
    'Roll a release back to a revision, the previous one by default (helm rollback, as you)',
    {
      params: ReleaseParams,
      querystring: ClusterQuery,
      body: RollbackBody,
      response: { 200: HelmRelease },
    },
  );
  for (const method of ['POST', 'PUT'] as const)
    app.route({
      method,
      url: `${RELEASES}/:namespace/:name/rollback`,
      onRequest: app.requireUser,
      schema: rollbackSchema,
      handler: withClientSignal(async (request, reply, signal) => {
        const { ctx, namespace } = await startWrite(request, reply, signal, CHANGE_VERBS);
        const { name } = request.params;
        const body = request.body ?? {};
        await readRelease(services, ctx, namespace, name, body.revision); // 404 before helm runs
        await asUser(request, ctx, { ...body, namespace, name }, (write) =>
          services.helm.rollback(write, body.revision),
        );
        return releaseView(await readRelease(services, ctx, namespace, name), true);
      }),
    });

  app.delete(
    `${RELEASES}/:namespace/:name`,
    {
      onRequest: app.requireUser,
      schema: clusterSchema('Uninstall a release (helm uninstall, as you)', {
        params: ReleaseParams,
        querystring: UninstallQuery,
        response: { 200: objectOf({ message: string }) },
      }),
    },
    withClientSignal(async (request, reply, signal) => {
      const { ctx, namespace } = await startWrite(
        request,
        reply,
        signal,
        request.query.keepHistory === true ? [...UNINSTALL_VERBS, 'update'] : UNINSTALL_VERBS,
      );
      const { name } = request.params;
      await readRelease(services, ctx, namespace, name); // 404 before helm runs
      await asUser(request, ctx, { ...request.query, wait: false, namespace, name }, (write) =>
        services.helm.uninstall(write, request.query.keepHistory === true),
      );
      return { message: 'helm release deleted' };
    }),
  );

  // ---- Charts ----
  app.get(
    '/api/v1/charts',
    {
      onRequest: app.requireUser,
      schema: schema('The charts the repositories offer, each at its newest version', {
        querystring: ChartsQuery,
        response: { 200: objectOf({ items: Type.Array(Chart), total: Type.Integer() }) },
      }),
    },
    async (request) => {
      const repositories = (await services.chartRepositories.list()).filter(
        (r) => request.query.repository === undefined || r.spec.name === request.query.repository,
      );
      const sources = repositories.map((r) => {
        const creds = services.chartRepositories.credentials(r);
        return { spec: r.spec, ...(creds ? { credentials: creds } : {}) };
      });
      const items = await services.helm.charts.charts(sources, request.query.q);
      return { items, total: items.length };
    },
  );

  app.get(
    '/api/v1/charts/:repository/:chart/versions',
    {
      onRequest: app.requireUser,
      schema: schema("A chart's versions, newest first", {
        params: ChartParams,
        response: { 200: Type.Array(ChartVersion) },
      }),
    },
    async (request) => {
      const choice = await chartChoice(request.params.repository, request.params.chart);
      const versions = await services.helm.charts.versions(
        { spec: choice.repository.spec, ...(choice.credentials ? { credentials: choice.credentials } : {}) },
        choice.chart,
      );
      return versions.map(({ version, appVersion, description, created }) => ({
        version,
        appVersion,
        description,
        created,
      }));
    },
  );

  // Also under Kite's spelling, /content/values (its answer there: {content}).
  for (const url of ['/api/v1/charts/:repository/:chart/values', '/api/v1/charts/:repository/:chart/content/values'])
    app.get(
      url,
      {
        onRequest: app.requireUser,
        schema: schema("A chart's default values (helm show values), the newest version unless ?version=", {
          params: ChartParams,
          querystring: VersionQuery,
          response: {
            200: objectOf({
              values: Type.String({ description: 'YAML text' }),
              content: Type.String({ description: 'the same (Kite)' }),
            }),
          },
        }),
      },
      withClientSignal(async (request, _reply, signal) => {
        const choice = await chartChoice(request.params.repository, request.params.chart, request.query.version);
        const release = holdRun(request.principal!, 'read');
        try {
          const values = await services.helm.showValues(choice, signal);
          return { values, content: values };
        } finally {
          release();
        }
      }),
    );

  // ---- Chart repositories ----
  const listRepositories = async () => (await services.chartRepositories.list()).map(repositoryView);
  for (const path of ['/api/v1/chart-repositories', '/api/v1/charts/repositories'])
    bothSlashes(path, (url) =>
      app.get(
        url,
        {
          onRequest: app.requireUser,
          schema: schema('The chart repositories (never their credentials)', {
            response: { 200: Type.Array(Repository) },
          }),
        },
        listRepositories,
      ),
    );
  bothSlashes(ADMIN_REPOSITORIES, (url) =>
    app.get(
      url,
      { schema: schema('The chart repositories (admins)', { response: { 200: Type.Array(Repository) } }) },
      listRepositories,
    ),
  );

  /** Username and password as given: both or neither (400). */
  function credentialsOf(body: { username?: string; password?: string }) {
    if ((body.username === undefined) !== (body.password === undefined))
      throw new BadRequestError('username and password go together');
    return body.username !== undefined ? { username: body.username, password: body.password! } : undefined;
  }

  bothSlashes(ADMIN_REPOSITORIES, (url) =>
    app.post(
      url,
      {
        schema: schema('Add a chart repository (credentials kept in a Secret)', {
          body: NewRepositoryBody,
          response: { 201: Repository },
        }),
      },
      async (request, reply) => {
        const { name, url: repoUrl, description, charts, plainHttp } = request.body;
        const spec: ChartRepositorySpec = {
          name,
          url: repoUrl,
          ...(description ? { description } : {}),
          ...(charts?.length ? { charts } : {}),
          ...(plainHttp ? { plainHttp } : {}),
        };
        checkRepository(spec);
        const created = await services.chartRepositories.create(spec, credentialsOf(request.body));
        reply.code(201);
        return repositoryView(created);
      },
    ),
  );

  app.put(
    `${ADMIN_REPOSITORIES}/:name`,
    {
      schema: schema("Change a chart repository's URL, description, charts or credentials (the name stays)", {
        params: RepositoryParams,
        body: RepositoryChangeBody,
        response: { 200: Repository },
      }),
    },
    async (request) => {
      const repository = await services.chartRepositories.byName(request.params.name);
      const { url: repoUrl, description, charts, plainHttp, clearCredentials } = request.body;
      const given = credentialsOf(request.body);
      if (given && clearCredentials) throw new BadRequestError('give credentials or clear them, not both');
      const changes = {
        ...(repoUrl !== undefined ? { url: repoUrl } : {}),
        ...(description !== undefined ? { description } : {}),
        ...(charts !== undefined ? { charts } : {}),
        ...(plainHttp !== undefined ? { plainHttp } : {}),
      };
      checkRepository({ ...repository.spec, ...changes });
      return repositoryView(
        await services.chartRepositories.update(repository, changes, clearCredentials ? null : given),
      );
    },
  );

  app.delete(
    `${ADMIN_REPOSITORIES}/:name`,
    {
      schema: schema('Delete a chart repository (and its credentials)', {
        params: RepositoryParams,
        response: { 200: objectOf({ message: string }) },
      }),
    },
    async (request) => {
      await services.chartRepositories.delete(await services.chartRepositories.byName(request.params.name));
      return { message: 'chart repository deleted' };
    },
  );
}
