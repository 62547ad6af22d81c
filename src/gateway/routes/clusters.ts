// Cluster registration (docs/clusters.md): the admin routes under /api/v1/admin/clusters/, the
// public bootstrap import, and GET /api/v1/clusters for any signed-in user. Each route parses,
// authorizes, calls one method of the cluster store (host/clusters.ts: the rules, the kubeconfig
// checks, the import lock, read-your-writes and the wait for a (re)connected cluster's first
// probe all live there) and shapes the answer.
import { Type, type Static } from 'typebox';
import { BadRequestError, ForbiddenError } from '../../errors.js';
import { bothSlashes, idParams, objectOf, PUBLIC, ref, schemaOf, type App } from '../schemas.js';

const CONFIG_MAX = 1024 * 1024;
const schema = schemaOf('clusters');
const text = (maxLength: number, description?: string) =>
  Type.Optional(Type.String({ maxLength, ...(description ? { description } : {}) }));
const flag = (description?: string) => Type.Optional(Type.Boolean(description ? { description } : {}));

const config = text(CONFIG_MAX, 'a kubeconfig (YAML); exec and auth-provider plugins and file paths are refused');
const inCluster = flag("the host cluster itself, through kiteline's service account");

/**
 * The body of create and update (update takes any subset, create needs a name); its Static type is
 * what the cluster store takes (ClusterInput, host/clusters.ts), checked by the compiler at each call.
 */
const ClusterBody = Type.Object({
  name: text(253),
  description: text(1024),
  config,
  prometheusURL: text(2048),
  inCluster,
  isDefault: flag('clears the flag on every other cluster'),
  enabled: flag(),
  impersonate: flag('send Impersonate-User/-Group for the caller'),
});
type ClusterBody = Static<typeof ClusterBody>;
const NewClusterBody = Type.Object({ ...ClusterBody.properties, name: Type.String({ maxLength: 253 }) });
const ImportBody = Type.Object({ config, inCluster });

const createSchema = schema('Register a cluster (kubeconfig checked at once; duplicate name: 409)', {
  body: NewClusterBody,
  response: { 201: objectOf({ id: Type.Integer(), message: Type.String() }) },
});

const updateSchema = schema('Change a cluster: absent members are left as they are', {
  description:
    'A cluster read from a source (Argo CD, Cluster API, ClusterProfile: its `source` member) is changed there: ' +
    '409 naming the source, except `{isDefault: true}`.',
  params: idParams,
  body: ClusterBody,
  response: { 200: ref('Message') },
});

const deleteSchema = schema(
  'Delete a cluster and its kubeconfig Secret (the default cluster: 400; one from a source: 409)',
  { params: idParams, response: { 200: ref('Message') } },
);

const importSchema = schemaOf('setup')('Register the first clusters: one per kubeconfig context, or the host cluster', {
  description:
    'Public only before the first super user is created and while no cluster exists; ' +
    "once a user was ever created it needs an admin (the super user's session cookie from create_super_user), " +
    'even if the clusters were all deleted. ' +
    'Only while no cluster exists (race-free); afterwards 403. The current context becomes the default.',
  security: PUBLIC,
  body: ImportBody,
  response: {
    201: objectOf({
      message: Type.String(),
      clusters: Type.Array(Type.String(), { description: 'the names registered' }),
      skipped: Type.Array(objectOf({ context: Type.String(), reason: Type.String() }), {
        description: 'contexts not registered, with the reason (absent when none)',
      }),
    }),
  },
});

const adminListSchema = schema('List registered clusters (admin view)', {
  response: { 200: Type.Array(ref('Cluster')) },
});
const userListSchema = schema('The enabled clusters the caller may use, by name', {
  response: { 200: Type.Array(ref('ClusterSummary')) },
});

function parseId(raw: string): number {
  if (!/^[1-9]\d{0,9}$/.test(raw)) throw new BadRequestError('invalid cluster id');
  return Number(raw);
}

export default async function clusterRoutes(app: App) {
  const store = app.services.clusterStore;

  const list = async () => store.views();
  bothSlashes('/api/v1/admin/clusters', (url) => app.get(url, { schema: adminListSchema }, list));

  bothSlashes('/api/v1/admin/clusters', (url) =>
    app.post(url, { schema: createSchema }, async (request, reply) => {
      const { id } = await store.create(request.body);
      reply.code(201);
      return { id, message: 'cluster created successfully' };
    }),
  );

  app.put('/api/v1/admin/clusters/:id', { schema: updateSchema }, async (request) => {
    const body: ClusterBody = request.body ?? {};
    const updated = await store.update(parseId(request.params.id), body);
    request.auditDetail = { name: updated.name };
    return { message: 'cluster updated successfully' };
  });

  app.delete('/api/v1/admin/clusters/:id', { schema: deleteSchema }, async (request) => {
    const deleted = await store.delete(parseId(request.params.id));
    request.auditDetail = { name: deleted.name };
    return { message: 'cluster deleted successfully' };
  });

  app.post('/api/v1/admin/clusters/import', { schema: importSchema }, async (request, reply) => {
    if (!store.importOpen()) throw new ForbiddenError('import not allowed when clusters exist');
    // Public only during first-run set-up: once a super user was ever created, an admin only.
    if (app.services.users.any() || (await store.setupOver())) await app.requireAdmin(request, reply);
    const { clusters, skipped } = await store.importClusters(request.body ?? {}, app.services.config.replicaId);
    request.auditDetail = { name: clusters.join(',') };
    reply.code(201);
    return {
      message: `imported ${clusters.length} cluster${clusters.length === 1 ? '' : 's'} successfully`,
      clusters,
      ...(skipped.length > 0 ? { skipped } : {}),
    };
  });

  app.get('/api/v1/clusters', { onRequest: app.requireUser, schema: userListSchema }, async (request) => {
    const principal = request.principal!;
    return store
      .views()
      .filter((view) => view.enabled && app.services.auth.canAccessCluster(principal, view.name))
      .sort((a, b) => a.name.localeCompare(b.name))
      .map(({ name, version, isDefault, ready, error }) => ({ name, version, isDefault, ready, error }));
  });
}
