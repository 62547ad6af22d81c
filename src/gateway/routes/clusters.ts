// Cluster registration (CONTRACT section 5): the admin routes under /api/v1/admin/clusters/, the
// public bootstrap import, and GET /api/v1/clusters for any signed-in user. Kubeconfigs are
// sanitized on the way in (kubeconfig.ts) and stored in a Secret the Cluster object references;
// the reconciler turns every change into a warm connection within a moment, and a route that
// (re)connects a cluster answers once this replica has probed it (ClusterManager.firstProbeAfterWrite).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { KubeconfigError, sanitizeAllContexts, sanitizeKubeconfig } from '../../clusters/kubeconfig.js';
import type { WrittenConnection } from '../../clusters/manager.js';
import { bootstrapClaimed } from '../../host/bootstrap.js';
import { clusterDisplayName, type NewCluster } from '../../host/clusters.js';
import { resourceId, type ClusterResource } from '../../host/resources.js';
import { BadRequestError, ConflictError, ForbiddenError, NotFoundError } from '../../errors.js';
import { idParams, objectOf, PUBLIC, ref, replies } from '../schemas.js';

/** Names clients send as x-cluster-name (also in a cookie or query), e.g. kubernetes-admin@prod. */
const CLUSTER_NAME = /^[A-Za-z0-9]([A-Za-z0-9._@:/-]{0,251}[A-Za-z0-9])?$/;
const NAME_RULE = 'cluster name must be 1 to 253 characters of letters, digits and . _ @ : / - (starting and ending with a letter or digit)';

const str = (maxLength: number) => ({ type: 'string', maxLength });
const CONFIG_MAX = 1024 * 1024;
const tags = ['clusters'];

/** The body fields of create and update (update takes any subset; create needs a name). */
const clusterProperties = {
  name: str(253),
  description: str(1024),
  config: { ...str(CONFIG_MAX), description: 'a kubeconfig (YAML); exec and auth-provider plugins and file paths are refused' },
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
    'Public only before the first super user is created and while no cluster exists; once a user was ever created it needs ' +
    'an admin (the super user\'s session cookie from create_super_user), even if the clusters were all deleted. ' +
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

const adminListSchema = { tags, summary: 'List registered clusters (admin view)', response: replies({ 200: { type: 'array', items: ref('Cluster') } }) };
const userListSchema = {
  tags,
  summary: 'The enabled clusters the caller may use, by name',
  response: replies({ 200: { type: 'array', items: ref('ClusterSummary') } }),
};

function checkName(name: string): string {
  if (!CLUSTER_NAME.test(name)) throw new BadRequestError(NAME_RULE);
  return name;
}

function checkPrometheusURL(url: string | undefined): string {
  if (!url) return '';
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new BadRequestError('prometheusURL must be an http(s) URL');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new BadRequestError('prometheusURL must be an http(s) URL');
  return url;
}

/** Sanitizes a kubeconfig for storage (its current context); a bad one is a 400 with the reason. */
function sanitizedConfig(config: string): string {
  try {
    return sanitizeKubeconfig(config).kubeconfig;
  } catch (err) {
    if (err instanceof KubeconfigError) throw new BadRequestError(`invalid kubeconfig: ${err.message}`);
    throw err;
  }
}

function parseId(raw: string): number {
  if (!/^[1-9]\d{0,9}$/.test(raw)) throw new BadRequestError('invalid cluster id');
  return Number(raw);
}

/** How a cluster written with these fields connects (see ClusterManager.firstProbeAfterWrite). */
function connectionOf(cluster: { inCluster: boolean; kubeconfig?: string | undefined }): WrittenConnection {
  return cluster.inCluster ? { inCluster: true } : { inCluster: false, kubeconfig: cluster.kubeconfig };
}

interface ClusterBody {
  name?: string;
  description?: string;
  config?: string;
  prometheusURL?: string;
  inCluster?: boolean;
  isDefault?: boolean;
  enabled?: boolean;
  impersonate?: boolean;
}

export default async function clusterRoutes(app: FastifyInstance) {
  const manager = app.services.clusterManager;
  const writes = manager.writes;

  const find = (rawId: string): ClusterResource => {
    const cr = manager.findById(parseId(rawId));
    if (!cr) throw new NotFoundError('cluster not found');
    return cr;
  };

  const list = async () => manager.listResources().map((cr) => manager.view(cr));
  for (const url of ['/api/v1/admin/clusters/', '/api/v1/admin/clusters']) {
    app.get(url, { onRequest: app.requireAdmin, schema: adminListSchema }, list);
  }

  const create = async (request: FastifyRequest<{ Body: ClusterBody }>, reply: FastifyReply) => {
    const body = request.body;
    const name = checkName(body.name ?? '');
    const inCluster = body.inCluster === true;
    if (inCluster && body.config) throw new BadRequestError('give either config or inCluster: true, not both');
    if (!inCluster && !body.config) throw new BadRequestError('config (a kubeconfig) is required unless inCluster is true');
    const first = manager.host.clusters.list().length === 0;
    const input: NewCluster = {
      name,
      description: body.description ?? '',
      prometheusURL: checkPrometheusURL(body.prometheusURL),
      inCluster,
      // The first cluster is the default: there is always exactly one when any exist.
      isDefault: body.isDefault === true || first,
      enabled: body.enabled !== false,
      impersonate: body.impersonate === true,
    };
    if (!inCluster) input.kubeconfig = sanitizedConfig(body.config!);
    const { id, objectName } = await writes.create(input);
    if (input.isDefault) await writes.clearDefaultExcept(objectName);
    if (input.enabled) await manager.firstProbeAfterWrite(objectName, connectionOf(input));
    return reply.code(201).send({ id, message: 'cluster created successfully' });
  };
  for (const url of ['/api/v1/admin/clusters/', '/api/v1/admin/clusters']) {
    app.post<{ Body: ClusterBody }>(url, { onRequest: app.requireAdmin, schema: createSchema }, create);
  }

  app.put<{ Params: { id: string }; Body: ClusterBody }>(
    '/api/v1/admin/clusters/:id',
    { onRequest: app.requireAdmin, schema: updateSchema },
    async (request) => {
      const cr = find(request.params.id);
      const body = request.body ?? {};
      const current = clusterDisplayName(cr);
      const changes: Parameters<typeof writes.update>[1] = {};
      if (body.name && body.name !== current) {
        changes.name = checkName(body.name);
        if (writes.nameTaken(changes.name, cr.metadata.name)) {
          throw new ConflictError(`cluster already exists: ${changes.name}`, 'AlreadyExists');
        }
      }
      if (body.description !== undefined) changes.description = body.description;
      if (body.prometheusURL !== undefined) changes.prometheusURL = checkPrometheusURL(body.prometheusURL);
      if (body.enabled !== undefined) changes.enabled = body.enabled;
      if (body.impersonate !== undefined) changes.impersonate = body.impersonate;
      if (body.isDefault !== undefined) {
        if (!body.isDefault && cr.spec?.isDefault) {
          throw new BadRequestError('there must be a default cluster: mark another cluster as default instead');
        }
        changes.isDefault = body.isDefault;
      }
      if (body.inCluster !== undefined) changes.inCluster = body.inCluster;
      const inCluster = changes.inCluster ?? cr.spec?.inCluster === true;
      if (body.config) {
        if (inCluster) throw new BadRequestError('an inCluster cluster takes no config; set inCluster: false to use one');
        changes.kubeconfig = sanitizedConfig(body.config);
      } else if (!inCluster && !cr.spec?.kubeconfigSecretRef) {
        throw new BadRequestError('config (a kubeconfig) is required when inCluster is false');
      }
      const updated = await writes.update(cr.metadata.name, changes);
      if (changes.isDefault) await writes.clearDefaultExcept(cr.metadata.name);
      const reconnects = changes.kubeconfig !== undefined || changes.inCluster !== undefined || changes.enabled === true;
      if (reconnects && updated.spec.enabled !== false) {
        await manager.firstProbeAfterWrite(cr.metadata.name, connectionOf({ inCluster, kubeconfig: changes.kubeconfig }));
      }
      request.auditDetail = { name: changes.name ?? current };
      return { message: 'cluster updated successfully' };
    },
  );

  app.delete<{ Params: { id: string } }>(
    '/api/v1/admin/clusters/:id',
    { onRequest: app.requireAdmin, schema: deleteSchema },
    async (request) => {
      const cr = find(request.params.id);
      await writes.delete(cr.metadata.name);
      request.auditDetail = { name: clusterDisplayName(cr) };
      return { message: 'cluster deleted successfully' };
    },
  );

  app.post<{ Body: { config?: string; inCluster?: boolean } }>(
    '/api/v1/admin/clusters/import',
    { schema: importSchema },
    async (request, reply) => {
      const body = request.body ?? {};
      const closed = () => new ForbiddenError('import not allowed when clusters exist');
      if (manager.host.clusters.list().length > 0) throw closed();
      // Public only during first-run set-up: once a super user was ever created, an admin only.
      if (app.services.users.any() || (await bootstrapClaimed(manager.host))) await app.requireAdmin(request, reply);
      const inCluster = body.inCluster === true;
      if (!inCluster && !body.config) throw new BadRequestError('send config (a kubeconfig) or inCluster: true');
      if (inCluster && body.config) throw new BadRequestError('give either config or inCluster: true, not both');

      // Validate everything before taking the lock, so a bad request never closes the import.
      const planned: NewCluster[] = [];
      const skipped: { context: string; reason: string }[] = [];
      const base = { description: '', prometheusURL: '', enabled: true, impersonate: false, isDefault: false };
      if (inCluster) {
        planned.push({ ...base, name: 'in-cluster', inCluster: true, isDefault: true, description: 'the cluster kiteline runs in' });
      } else {
        let all: ReturnType<typeof sanitizeAllContexts>;
        try {
          all = sanitizeAllContexts(body.config!);
        } catch (err) {
          if (err instanceof KubeconfigError) throw new BadRequestError(`invalid kubeconfig: ${err.message}`);
          throw err;
        }
        for (const ctx of all.usable) {
          if (!CLUSTER_NAME.test(ctx.context)) {
            skipped.push({ context: ctx.context, reason: NAME_RULE });
            continue;
          }
          planned.push({ ...base, name: ctx.context, inCluster: false, kubeconfig: ctx.kubeconfig, isDefault: ctx.context === all.current });
        }
        skipped.push(...all.skipped);
        if (planned.length === 0) {
          const reasons = skipped.map((s) => `${s.context}: ${s.reason}`).join('; ');
          throw new BadRequestError(`invalid kubeconfig: no usable context${reasons ? ` (${reasons})` : ''}`);
        }
        if (!planned.some((p) => p.isDefault)) planned[0]!.isDefault = true;
      }

      if (!(await writes.acquireImportLock(app.services.config.replicaId))) throw closed();
      if (manager.host.clusters.list().length > 0) throw closed();
      const created: string[] = [];
      const written: Array<{ objectName: string; cluster: NewCluster }> = [];
      try {
        // The default first: the reconciler never sees clusters without a default (it would mark another).
        for (const cluster of [...planned].sort((x, y) => Number(y.isDefault) - Number(x.isDefault))) {
          const { objectName } = await writes.create(cluster);
          created.push(cluster.name);
          written.push({ objectName, cluster });
        }
      } finally {
        if (created.length === 0) await writes.releaseImportLock().catch(() => undefined);
      }
      await Promise.all(written.map(({ objectName, cluster }) => manager.firstProbeAfterWrite(objectName, connectionOf(cluster))));
      request.auditDetail = { name: created.join(',') };
      return reply.code(201).send({
        message: `imported ${created.length} cluster${created.length === 1 ? '' : 's'} successfully`,
        clusters: planned.map((p) => p.name).filter((name) => created.includes(name)),
        ...(skipped.length > 0 ? { skipped } : {}),
      });
    },
  );

  app.get('/api/v1/clusters', { onRequest: app.requireUser, schema: userListSchema }, async (request) => {
    const principal = request.principal!;
    return manager
      .listResources()
      .filter((cr) => cr.spec?.enabled !== false && resourceId(cr) !== undefined)
      .map((cr) => manager.view(cr))
      .filter((view) => app.services.auth.canAccessCluster(principal, view.name))
      .sort((a, b) => a.name.localeCompare(b.name))
      .map(({ name, version, isDefault, ready, error }) => ({ name, version, isDefault, ready, error }));
  });
}
