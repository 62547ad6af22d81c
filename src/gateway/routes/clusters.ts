// Cluster registration (CONTRACT section 5): the admin routes under /api/v1/admin/clusters/, the
// public bootstrap import, and GET /api/v1/clusters for any signed-in user. Each route parses,
// authorizes, calls one method of the cluster store (host/clusters.ts: the rules, the kubeconfig
// checks, the import lock, read-your-writes and the wait for a (re)connected cluster's first
// probe all live there) and shapes the answer.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ClusterInput } from '../../host/clusters.js';
import { BadRequestError, ForbiddenError } from '../../errors.js';
import { idParams, objectOf, PUBLIC, ref, replies } from '../schemas.js';

const str = (maxLength: number) => ({ type: 'string', maxLength });
const CONFIG_MAX = 1024 * 1024;
const tags = ['clusters'];

/** The body of create and update: ClusterInput (host/clusters.ts); update takes any subset, create needs a name. */
const clusterProperties = {
  name: str(253),
  description: str(1024),
  config: {
    ...str(CONFIG_MAX),
    description: 'a kubeconfig (YAML); exec and auth-provider plugins and file paths are refused',
  },
  prometheusURL: str(2048),
  inCluster: { type: 'boolean', description: "the host cluster itself, through kiteline's service account" },
  isDefault: { type: 'boolean', description: 'clears the flag on every other cluster' },
  enabled: { type: 'boolean' },
  impersonate: { type: 'boolean', description: 'send Impersonate-User/-Group for the caller' },
};

const createSchema = {
  tags,
  summary: 'Register a cluster (kubeconfig checked at once; duplicate name: 409)',
  body: {
    type: 'object',
    required: ['name'],
    properties: clusterProperties,
  },
  response: replies({ 201: objectOf({ id: { type: 'integer' }, message: { type: 'string' } }) }),
};

const updateSchema = {
  tags,
  summary: 'Change a cluster: absent members are left as they are',
  params: idParams,
  body: {
    type: 'object',
    properties: clusterProperties,
  },
  response: replies({ 200: ref('Message') }),
};

const deleteSchema = {
  tags,
  summary: 'Delete a cluster and its kubeconfig Secret (the default cluster: 400)',
  params: idParams,
  response: replies({ 200: ref('Message') }),
};

const importSchema = {
  tags: ['setup'],
  summary: 'Register the first clusters: one per kubeconfig context, or the host cluster',
  description:
    'Public only before the first super user is created and while no cluster exists; ' +
    "once a user was ever created it needs an admin (the super user's session cookie from create_super_user), " +
    'even if the clusters were all deleted. ' +
    'Only while no cluster exists (race-free); afterwards 403. The current context becomes the default.',
  security: PUBLIC,
  body: {
    type: 'object',
    properties: {
      config: clusterProperties.config,
      inCluster: clusterProperties.inCluster,
    },
  },
  response: replies({
    201: objectOf({
      message: { type: 'string' },
      clusters: { type: 'array', items: { type: 'string' }, description: 'the names registered' },
      skipped: {
        type: 'array',
        description: 'contexts not registered, with the reason (absent when none)',
        items: objectOf({ context: { type: 'string' }, reason: { type: 'string' } }),
      },
    }),
  }),
};

const adminListSchema = {
  tags,
  summary: 'List registered clusters (admin view)',
  response: replies({ 200: { type: 'array', items: ref('Cluster') } }),
};
const userListSchema = {
  tags,
  summary: 'The enabled clusters the caller may use, by name',
  response: replies({ 200: { type: 'array', items: ref('ClusterSummary') } }),
};

function parseId(raw: string): number {
  if (!/^[1-9]\d{0,9}$/.test(raw)) throw new BadRequestError('invalid cluster id');
  return Number(raw);
}

export default async function clusterRoutes(app: FastifyInstance) {
  const store = app.services.clusterStore;

  const list = async () => store.views();
  for (const url of ['/api/v1/admin/clusters/', '/api/v1/admin/clusters']) {
    app.get(url, { onRequest: app.requireAdmin, schema: adminListSchema }, list);
  }

  const create = async (request: FastifyRequest<{ Body: ClusterInput }>, reply: FastifyReply) => {
    const { id } = await store.create(request.body);
    return reply.code(201).send({ id, message: 'cluster created successfully' });
  };
  for (const url of ['/api/v1/admin/clusters/', '/api/v1/admin/clusters']) {
    app.post<{ Body: ClusterInput }>(url, { onRequest: app.requireAdmin, schema: createSchema }, create);
  }

  app.put<{ Params: { id: string }; Body: ClusterInput }>(
    '/api/v1/admin/clusters/:id',
    { onRequest: app.requireAdmin, schema: updateSchema },
    async (request) => {
      const updated = await store.update(parseId(request.params.id), request.body ?? {});
      request.auditDetail = { name: updated.name };
      return { message: 'cluster updated successfully' };
    },
  );

  app.delete<{ Params: { id: string } }>(
    '/api/v1/admin/clusters/:id',
    { onRequest: app.requireAdmin, schema: deleteSchema },
    async (request) => {
      const deleted = await store.delete(parseId(request.params.id));
      request.auditDetail = { name: deleted.name };
      return { message: 'cluster deleted successfully' };
    },
  );

  app.post<{ Body: Pick<ClusterInput, 'config' | 'inCluster'> }>(
    '/api/v1/admin/clusters/import',
    { schema: importSchema },
    async (request, reply) => {
      if (!store.importOpen()) throw new ForbiddenError('import not allowed when clusters exist');
      // Public only during first-run set-up: once a super user was ever created, an admin only.
      if (app.services.users.any() || (await store.setupOver())) await app.requireAdmin(request, reply);
      const { clusters, skipped } = await store.importClusters(request.body ?? {}, app.services.config.replicaId);
      request.auditDetail = { name: clusters.join(',') };
      return reply.code(201).send({
        message: `imported ${clusters.length} cluster${clusters.length === 1 ? '' : 's'} successfully`,
        clusters,
        ...(skipped.length > 0 ? { skipped } : {}),
      });
    },
  );

  app.get('/api/v1/clusters', { onRequest: app.requireUser, schema: userListSchema }, async (request) => {
    const principal = request.principal!;
    return store
      .views()
      .filter((view) => view.enabled && app.services.auth.canAccessCluster(principal, view.name))
      .sort((a, b) => a.name.localeCompare(b.name))
      .map(({ name, version, isDefault, ready, error }) => ({ name, version, isDefault, ready, error }));
  });
}
