// The resource gateway (docs/resources.md): /api/v1/<resource>/<namespace|_all>[/<name>] for
// GET (list, get, watch), POST, PUT, PATCH and DELETE on any resource the selected cluster serves,
// Kite's live list of any resource (GET .../<namespace|_all>/watch as server-sent events),
// and GET and PATCH of an object's subresources that read or write it (/<name>/status, scale, resize,
// ephemeralcontainers), authorized as what they are ("pods/resize"), not as the object.
// Registered last with prefix /api/v1 so admin, auth and cluster routes win. The logic lives in
// src/resources/; this file wires each route to it: authenticate, pick the cluster, resolve the
// resource, authorize, send upstream, stream the answer back.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type, type Static } from 'typebox';
import type { Principal, Verb } from '../../auth/principal.js';
import type { ClusterConnection } from '../../clusters/types.js';
import { NotFoundError } from '../../errors.js';
import { requireAccess, verbFor } from '../../cluster-access/access.js';
import { isWriteVerb } from '../../resources/audit.js';
import { CACHE_HEADER, type CacheRead } from '../../resources/cache/read-cache.js';
import { requireReplacedObject } from '../../cluster-access/create-on-update.js';
import { isNodes, refuseEvictingWrite, refuseOnKitelineNode } from '../../cluster-access/kiteline-node.js';
import { JSON_MEDIA_TYPES, registerBodyParsers, YAML_MEDIA_TYPES } from '../../cluster-access/body-parsers.js';
import { holdClusterSlot, isLongRunning } from '../../resources/cluster-slot.js';
import { endOnRevocation } from '../stream-revocation.js';
import {
  DEFAULT_DELETE_TIMEOUT_SECONDS,
  deleteOptions,
  DeleteQuery,
  deletedAtOnce,
  waitUntilDeleted,
} from '../../resources/delete.js';
import { impersonationHeaders, upstreamHeaders, type UpstreamHeaders } from '../../cluster-access/impersonation.js';
import { PATCH_CONTENT_TYPES, patchTypeOf, preparePatch } from '../../cluster-access/patch.js';
import { getSearch, listSearch, objectWatchSearch, ReadQuery, withSearch } from '../../cluster-access/read-query.js';
import {
  checkSegments,
  NAME_PATTERN,
  NAMESPACE_PATTERN,
  RESOURCE_PATTERN,
  type PathSegments,
} from '../../cluster-access/segments.js';
import {
  collectionPath,
  describeObject,
  objectPath,
  planTarget,
  type ResourceTarget,
} from '../../cluster-access/target.js';
import { bodyRequest, expectSuccess, readJson, sendObject, streamToClient } from '../../cluster-access/upstream.js';
import { prepareWrite } from '../../cluster-access/write-body.js';
import { PatchQuery, WriteQuery, writeSearch } from '../../resources/write-query.js';
import {
  ClusterQuery,
  clusterSchema,
  LiveListQuery,
  liveListEvents,
  ref,
  type App,
  type RequestWith,
} from '../schemas.js';
import { EventStream } from '../../cluster-access/sse.js';
import { openWatch, reduceObject, relayWatch } from '../../cluster-access/watch-events.js';
import { callerCluster, withClientSignal } from '../tool-request.js';

/** The first segment of the admin routes (/api/v1/admin/...): no resource of any cluster. */
const ADMIN_SCOPE = 'admin';

const resource = Type.String({
  maxLength: 253,
  pattern: RESOURCE_PATTERN,
  description: 'a plural resource name (`pods`) or `<plural>.<group>`',
});
const namespace = Type.String({
  maxLength: 63,
  pattern: NAMESPACE_PATTERN,
  description: 'a namespace, or `_all` (all namespaces; cluster-scoped kinds)',
});
const name = Type.String({ maxLength: 253, pattern: NAME_PATTERN });
/** /:resource, /:resource/:namespace and /:resource/:namespace/:name. */
const ResourceParams = Type.Object({ resource });
const CollectionParams = Type.Object({ resource, namespace });
const ObjectParams = Type.Object({ resource, namespace, name });
/**
 * The subresources that read or write an object (the connect ones, exec, attach, portforward and
 * proxy, have routes of their own): `status` (every kind with one), `scale` (workloads), `resize`
 * (in-place pod resize, Kubernetes 1.33+) and `ephemeralcontainers` (kubectl debug).
 */
const OBJECT_SUBRESOURCES = ['status', 'scale', 'resize', 'ephemeralcontainers'] as const;
const SubresourceParams = Type.Object({
  resource,
  namespace,
  name,
  subresource: Type.Unsafe<(typeof OBJECT_SUBRESOURCES)[number]>({
    type: 'string',
    enum: [...OBJECT_SUBRESOURCES],
    description: 'a subresource that reads or writes the object',
  }),
});
/** What a handler reads of any of the three. */
type Params = Static<typeof ResourceParams> & Partial<Static<typeof ObjectParams>>;

const JSON_HEADERS = { accept: 'application/json' };

// The schemas of the resource routes. Answers stream through from the cluster (Fastify never
// re-serializes a stream), so the response schemas only document; request bodies are documented
// but checked by the handlers, which give clearer messages than a schema could.
const object = ref('KubernetesObject');
const objectBody = {
  documentedBody: { ...object },
  consumes: [JSON_MEDIA_TYPES[0], ...YAML_MEDIA_TYPES.slice(1)],
};
const patchBody = {
  documentedBody: {
    description: 'a patch document: an object (strategic merge, merge, apply) or an array of operations (json)',
  },
  consumes: [...JSON_MEDIA_TYPES, YAML_MEDIA_TYPES[0]],
};
const objectParts = { params: ObjectParams, querystring: ReadQuery, response: { 200: object } };
const schemas = {
  listAll: clusterSchema('List a resource in all namespaces (or watch it: watch=true)', {
    ...objectParts,
    params: ResourceParams,
  }),
  list: clusterSchema('List a resource in a namespace or `_all` (or watch it: watch=true)', {
    ...objectParts,
    params: CollectionParams,
  }),
  get: clusterSchema('Get an object (or watch it: watch=true)', objectParts),
  liveList: clusterSchema(
    "Kite's live list: the objects of a namespace or `_all` as server-sent events (send Accept: text/event-stream)",
    { params: CollectionParams, querystring: LiveListQuery, response: { 200: liveListEvents('an object each') } },
  ),
  create: clusterSchema('Create an object; metadata.namespace must match the path or is filled from it', {
    ...objectBody,
    params: CollectionParams,
    querystring: WriteQuery,
    response: { 201: object, 200: object, 202: object },
  }),
  replace: clusterSchema('Replace an object (metadata.resourceVersion required; stale: 409)', {
    ...objectBody,
    params: ObjectParams,
    querystring: WriteQuery,
    response: { 200: object, 201: object },
  }),
  patch: clusterSchema(
    'Patch an object: patchType absent = strategic merge, merge, json, apply (server-side apply, needs fieldManager)',
    { ...patchBody, params: ObjectParams, querystring: PatchQuery, response: { 200: object, 201: object } },
  ),
  getSubresource: clusterSchema('Get a subresource of an object (status, scale, resize, ephemeralcontainers)', {
    ...objectParts,
    params: SubresourceParams,
    querystring: ClusterQuery,
  }),
  patchSubresource: clusterSchema(
    'Patch a subresource of an object, e.g. pods/resize (in-place resize); authorized as <resource>/<subresource>',
    { ...patchBody, params: SubresourceParams, querystring: PatchQuery, response: { 200: object } },
  ),
  remove: clusterSchema('Delete an object; by default waits until it is gone (504 when timeoutSeconds runs out)', {
    params: ObjectParams,
    querystring: DeleteQuery,
    response: { 200: object, 202: object },
  }),
};

/** What every resource request works with once the cluster and resource are known. */
interface Prepared {
  principal: Principal;
  conn: ClusterConnection;
  target: ResourceTarget;
  impersonation: UpstreamHeaders;
  /** Aborted when the client goes away before the answer is complete. */
  signal: AbortSignal;
}

/** A read as the read cache takes it (it answers, or the route sends it to the cluster). */
function cacheRead(p: Prepared, query: ReadQuery, name: string | undefined): CacheRead {
  return {
    conn: p.conn,
    impersonation: p.impersonation,
    resolved: p.target.resolved,
    namespace: p.target.namespace,
    name,
    query,
    signal: p.signal,
  };
}

export default async function resourceRoutes(app: App) {
  registerBodyParsers(app);
  const { hostGuard } = app.services;
  // /api/v1/admin/... is the admin routes' scope, never a resource: a path none of them claims is
  // the not-found handler's 404 (before any check of the segments, which would answer 400).
  app.addHook('onRequest', async (request, reply) => {
    if ((request.params as { resource?: string }).resource === ADMIN_SCOPE) return reply.callNotFound();
  });

  /** Authentication is done (onRequest); cluster, segments and resource come next. */
  async function prepare(
    request: RequestWith<{ params: Params }>,
    reply: FastifyReply,
    signal: AbortSignal,
    liveList = false,
  ): Promise<Prepared> {
    const { params } = request;
    const segments: PathSegments = checkSegments({
      resource: params.resource,
      namespace: params.namespace,
      name: params.name,
    });
    const { principal, conn } = await callerCluster(app, request);
    const longRunning = liveList || isLongRunning(request.method, request.query as ReadQuery & DeleteQuery);
    holdClusterSlot(reply, conn, principal, longRunning);
    if (longRunning) endOnRevocation(app.services, request, reply);
    const resolved = await conn.resolveResource(segments.resource);
    if (!resolved) throw new NotFoundError(`resource not found on cluster ${conn.name}: ${segments.resource}`);
    const target = planTarget(resolved, segments);
    return { principal, conn, target, impersonation: impersonationHeaders(conn, principal), signal };
  }

  /**
   * One write upstream with the caller's impersonation; a non-2xx answer throws, keeping its
   * Status. `turnKey` (the object's path, for PUT and PATCH) makes writes to one object take turns.
   */
  async function send(p: Prepared, method: string, path: string, contentType: string, body: string, turnKey?: string) {
    const { headers, body: framed } = bodyRequest(contentType, body, upstreamHeaders({}, p.impersonation));
    return expectSuccess(await p.conn.request({ method, path, headers, body: framed, signal: p.signal, turnKey }));
  }

  /**
   * What the cluster would make of a write (run with dryRun=All as the caller), read whole: whether a
   * write of a node adds a NoExecute taint, whatever the patch type says.
   */
  async function dryRun(
    p: Prepared,
    method: string,
    path: string,
    search: URLSearchParams | Static<typeof WriteQuery>,
    contentType: string,
    body: string,
  ): Promise<unknown> {
    const dry = search instanceof URLSearchParams ? new URLSearchParams(search) : writeSearch(search);
    dry.set('dryRun', 'All');
    return readJson(await send(p, method, withSearch(path, dry), contentType, body));
  }

  /** The caller's roles, then the host guard (kiteline's own namespace and group: 403 for everyone). */
  async function authorize(
    request: FastifyRequest,
    p: Prepared,
    verb: Verb,
    namespace: string | undefined,
    name: string | undefined,
    dryRun = false,
  ): Promise<void> {
    if (isWriteVerb(verb)) {
      request.auditDetail = { verb, cluster: p.conn.name, resource: p.target.resource, namespace, name, dryRun };
    }
    requireAccess(app.services.auth, p.principal, p.conn.name, p.target.resource, namespace, verb);
    const slash = p.target.resource.indexOf('/');
    const subresource = slash < 0 ? undefined : p.target.resource.slice(slash + 1);
    await app.services.hostGuard.check(p.conn, { resolved: p.target.resolved, namespace, name, verb, subresource });
  }

  /**
   * Kite's live list of any resource (GET <resource>/<namespace|_all>/watch, server-sent events;
   * pods have their own, with metrics: routes/pod-watch.ts): authorized as the watch it is.
   */
  async function liveList(
    request: RequestWith<{ params: Params; query: Static<typeof LiveListQuery> }>,
    reply: FastifyReply,
    signal: AbortSignal,
  ) {
    const p = await prepare(request, reply, signal, true);
    const { query } = request;
    await authorize(request, p, 'watch', p.target.namespace, undefined);
    const fieldSelector = await hostGuard.listFieldSelector(
      p.conn,
      p.target.resolved,
      p.target.namespace,
      query.fieldSelector,
    );
    const search = listSearch({ labelSelector: query.labelSelector, fieldSelector, watch: true });
    // Opened before the answer starts: a bad selector or a refusal is a plain HTTP error.
    const upstream = await openWatch(
      p.conn,
      p.impersonation,
      withSearch(collectionPath(p.target.resolved, p.target.namespace), search),
      signal,
    );
    const events = new EventStream(reply, signal);
    endOnRevocation(app.services, request, reply, { end: (message) => events.endWithError(message) });
    const reduce = query.reduce === 'true';
    void relayWatch<Record<string, unknown>>(events, upstream, (name, event) =>
      events.sendJson(name, reduce ? reduceObject(event.object) : event.object),
    );
    return reply;
  }

  async function list(
    request: RequestWith<{ params: Params; query: ReadQuery }>,
    reply: FastifyReply,
    signal: AbortSignal,
  ) {
    const p = await prepare(request, reply, signal);
    const { query } = request;
    await authorize(request, p, verbFor(request.method, false, !!query.watch), p.target.namespace, undefined);
    const fieldSelector = await hostGuard.listFieldSelector(
      p.conn,
      p.target.resolved,
      p.target.namespace,
      query.fieldSelector,
    );
    if (!query.watch) {
      const cached = await app.services.readCache.read(cacheRead(p, { ...query, fieldSelector }, undefined));
      if (cached) return sendObject(reply.header(CACHE_HEADER, 'hit'), cached);
    }
    const path = withSearch(
      collectionPath(p.target.resolved, p.target.namespace),
      listSearch({ ...query, fieldSelector }),
    );
    const res = await expectSuccess(
      await p.conn.request({
        method: 'GET',
        path,
        headers: upstreamHeaders(JSON_HEADERS, p.impersonation),
        signal: p.signal,
      }),
    );
    return streamToClient(reply, res, { flushHeaders: !!query.watch });
  }

  async function get(
    request: RequestWith<{ params: Params; query: ReadQuery }>,
    reply: FastifyReply,
    signal: AbortSignal,
  ) {
    const p = await prepare(request, reply, signal);
    const { resolved, namespace, name } = p.target;
    const { query } = request;
    await authorize(request, p, verbFor(request.method, true, !!query.watch), namespace, name);
    const headers = upstreamHeaders(JSON_HEADERS, p.impersonation);
    if (!query.watch) {
      const cached = await app.services.readCache.read(cacheRead(p, query, name));
      if (cached) return sendObject(reply.header(CACHE_HEADER, 'hit'), cached);
      // One object: read whole, shared with identical reads waiting at the same time.
      const path = withSearch(objectPath(resolved, namespace, name!), getSearch(query));
      return sendObject(reply, await p.conn.readObject({ path, headers, signal: p.signal }));
    }
    const path = withSearch(collectionPath(resolved, namespace), objectWatchSearch(query, name!));
    const res = await expectSuccess(await p.conn.request({ method: 'GET', path, headers, signal: p.signal }));
    return streamToClient(reply, res, { flushHeaders: true });
  }

  async function create(
    request: RequestWith<{ params: Params; query: Static<typeof WriteQuery> }>,
    reply: FastifyReply,
    signal: AbortSignal,
  ) {
    const p = await prepare(request, reply, signal);
    const { query } = request;
    const write = prepareWrite(
      request.body,
      p.target.resolved,
      p.target.resource,
      p.target.namespace,
      undefined,
      'POST',
    );
    await authorize(request, p, 'create', write.namespace, write.name, !!query.dryRun);
    const path = withSearch(collectionPath(p.target.resolved, write.namespace), writeSearch(query));
    const res = await send(p, 'POST', path, 'application/json', JSON.stringify(write.object));
    return streamToClient(reply, res);
  }

  async function replace(
    request: RequestWith<{ params: Params; query: Static<typeof WriteQuery> }>,
    reply: FastifyReply,
    signal: AbortSignal,
  ) {
    const p = await prepare(request, reply, signal);
    const { resolved, resource, namespace, name } = p.target;
    const { query } = request;
    const write = prepareWrite(request.body, resolved, resource, namespace, name, 'PUT');
    await authorize(request, p, 'update', write.namespace, name, !!query.dryRun);
    const object = objectPath(resolved, write.namespace, name!);
    // A PUT creates a missing object of some kinds: without create, it must replace one that exists,
    // and its uid pins it (an object deleted meanwhile is not created either).
    const uid = await requireReplacedObject(app.services.auth, p.principal, {
      conn: p.conn,
      resource,
      namespace: write.namespace,
      name: name!,
      objectPath: object,
      headers: upstreamHeaders({}, p.impersonation),
      signal: p.signal,
    });
    if (uid !== undefined && write.object.metadata.uid === undefined) write.object.metadata.uid = uid;
    const body = JSON.stringify(write.object);
    if (isNodes(resolved))
      await refuseEvictingWrite(hostGuard, p.conn, name!, () =>
        dryRun(p, 'PUT', object, query, 'application/json', body),
      );
    const res = await send(p, 'PUT', withSearch(object, writeSearch(query)), 'application/json', body, object);
    return streamToClient(reply, res);
  }

  async function patch(
    request: RequestWith<{ params: Params; query: Static<typeof PatchQuery> }>,
    reply: FastifyReply,
    signal: AbortSignal,
  ) {
    const p = await prepare(request, reply, signal);
    const { resolved, namespace, name } = p.target;
    // Server-side apply creates a missing object: it needs create as well.
    return sendPatch(request, reply, p, objectPath(resolved, namespace, name!), true);
  }

  /**
   * A PATCH of the object or subresource at `path`, the patch checked before anything is sent; with
   * `applyCreates`, an apply patch (which creates a missing object) needs create as well.
   */
  async function sendPatch(
    request: RequestWith<{ query: Static<typeof PatchQuery> }>,
    reply: FastifyReply,
    p: Prepared,
    path: string,
    applyCreates: boolean,
  ) {
    const { resource, namespace, name } = p.target;
    const { query } = request;
    const type = patchTypeOf(query.patchType, request.headers['content-type']);
    const body = preparePatch(type, request.body, {
      resource,
      namespace,
      name: name!,
      fieldManager: query.fieldManager,
    });
    await authorize(request, p, 'patch', namespace, name, !!query.dryRun);
    if (applyCreates && type === 'apply')
      requireAccess(app.services.auth, p.principal, p.conn.name, resource, namespace, 'create');
    const search = writeSearch(query, { apply: type === 'apply' });
    if (applyCreates && isNodes(p.target.resolved)) {
      const patchOf = () => dryRun(p, 'PATCH', path, search, PATCH_CONTENT_TYPES[type], body);
      await refuseEvictingWrite(hostGuard, p.conn, name!, patchOf);
    }
    const res = await send(p, 'PATCH', withSearch(path, search), PATCH_CONTENT_TYPES[type], body, path);
    return streamToClient(reply, res);
  }

  /** A request to /<name>/<subresource>: the object's path plus the subresource, and its own access rule. */
  async function prepareSubresource(
    request: RequestWith<{ params: Params & { subresource: string } }>,
    reply: FastifyReply,
    signal: AbortSignal,
  ): Promise<Prepared & { path: string }> {
    const p = await prepare(request, reply, signal);
    const { resolved, namespace, name, resource } = p.target;
    const sub = request.params.subresource;
    return {
      ...p,
      target: { ...p.target, resource: `${resource}/${sub}` },
      path: `${objectPath(resolved, namespace, name!)}/${sub}`,
    };
  }

  async function getSubresource(
    request: RequestWith<{ params: Params & { subresource: string } }>,
    reply: FastifyReply,
    signal: AbortSignal,
  ) {
    const p = await prepareSubresource(request, reply, signal);
    await authorize(request, p, 'get', p.target.namespace, p.target.name);
    const headers = upstreamHeaders(JSON_HEADERS, p.impersonation);
    return sendObject(reply, await p.conn.readObject({ path: p.path, headers, signal: p.signal }));
  }

  async function patchSubresource(
    request: RequestWith<{ params: Params & { subresource: string }; query: Static<typeof PatchQuery> }>,
    reply: FastifyReply,
    signal: AbortSignal,
  ) {
    const p = await prepareSubresource(request, reply, signal);
    return sendPatch(request, reply, p, p.path, false);
  }

  async function remove(
    request: RequestWith<{ params: Params; query: DeleteQuery }>,
    reply: FastifyReply,
    signal: AbortSignal,
  ) {
    const p = await prepare(request, reply, signal);
    const { resolved, resource, namespace, name } = p.target;
    const { query } = request;
    await authorize(request, p, 'delete', namespace, name, !!query.dryRun);
    if (isNodes(resolved)) await refuseOnKitelineNode(hostGuard, p.conn, name!, 'delete', p.signal);
    const res = await send(
      p,
      'DELETE',
      objectPath(resolved, namespace, name!),
      'application/json',
      JSON.stringify(deleteOptions(query)),
    );
    if (query.wait === false || query.dryRun) return streamToClient(reply, res);
    const description = describeObject(resource, namespace, name!);
    const answer: unknown = await readJson(res);
    if (!deletedAtOnce(answer)) {
      await waitUntilDeleted({
        conn: p.conn,
        collectionPath: collectionPath(resolved, namespace),
        name: name!,
        description,
        timeoutSeconds: query.timeoutSeconds ?? DEFAULT_DELETE_TIMEOUT_SECONDS,
        signal: p.signal,
        // kiteline's own identity: the caller may delete without being allowed to list or watch,
        // and the wait tells them nothing but whether the object they deleted is gone.
        headers: {},
      });
    }
    return reply.code(200).send({ message: `${description} deleted` });
  }

  // Each handler gets a signal that aborts when the client goes away before the answer is complete
  // (closing the upstream request, e.g. a watch); failures after that are logged as 499.
  const guarded = withClientSignal;

  // Authenticate in onRequest: no body is parsed or validated for an anonymous caller.
  const onRequest = app.requireUser;
  const byName = '/:resource/:namespace/:name';
  app.get('/:resource', { onRequest, schema: schemas.listAll }, guarded(list));
  app.get('/:resource/:namespace', { onRequest, schema: schemas.list }, guarded(list));
  // Only for clients that accept text/event-stream; any other GET of it reads the object "watch".
  app.get(
    '/:resource/:namespace/watch',
    { onRequest, schema: schemas.liveList, constraints: { eventStream: 'yes' } },
    guarded(liveList),
  );
  app.get(byName, { onRequest, schema: schemas.get }, guarded(get));
  app.post('/:resource/:namespace', { onRequest, schema: schemas.create }, guarded(create));
  app.put(byName, { onRequest, schema: schemas.replace }, guarded(replace));
  app.patch(byName, { onRequest, schema: schemas.patch }, guarded(patch));
  app.get(`${byName}/:subresource`, { onRequest, schema: schemas.getSubresource }, guarded(getSubresource));
  app.patch(`${byName}/:subresource`, { onRequest, schema: schemas.patchSubresource }, guarded(patchSubresource));
  app.delete(byName, { onRequest, schema: schemas.remove }, guarded(remove));
}
