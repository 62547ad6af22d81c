// GET /api/v1/events/resources?resource=&name=&namespace=: the events of one object (Kite's
// route and answer, a core/v1 EventList, newest first). Authorized as `get` on the object's
// resource and `list` on events where they are kept: the object's namespace, or all namespaces
// for a cluster-scoped object (a Node's events live in "default"); the host guard applies to both.
import { Type } from 'typebox';
import { NotFoundError } from '../../errors.js';
import { requireAccess } from '../../cluster-access/access.js';
import { checkSegments, NAME_PATTERN, RESOURCE_PATTERN } from '../../cluster-access/segments.js';
import { planTarget } from '../../cluster-access/target.js';
import { objectEvents } from '../../tools/events.js';
import { clusterQueryProperties, clusterSchema, objectOf, openObject, type App } from '../schemas.js';
import { toolRequest, withClientSignal } from '../tool-request.js';

const EventsQuery = Type.Object({
  resource: Type.String({
    maxLength: 253,
    pattern: RESOURCE_PATTERN,
    description: 'a plural resource name (`pods`) or `<plural>.<group>`',
  }),
  name: Type.String({ maxLength: 253, pattern: NAME_PATTERN }),
  namespace: Type.Optional(
    Type.String({
      maxLength: 63,
      pattern: '^(_all|[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)?$',
      description: 'empty or `_all` for a cluster-scoped object',
    }),
  ),
  ...clusterQueryProperties,
});

export const EventList = objectOf(
  { apiVersion: Type.String(), kind: Type.String(), metadata: openObject(), items: Type.Array(openObject()) },
  'A core/v1 EventList: the events of the object, newest first (events.k8s.io/v1 events converted to the core shape)',
);

export default async function eventRoutes(app: App) {
  app.get(
    '/api/v1/events/resources',
    {
      onRequest: app.requireUser,
      schema: clusterSchema('The events of one object, newest first (core/v1 and events.k8s.io/v1, merged)', {
        querystring: EventsQuery,
        response: { 200: EventList },
      }),
    },
    withClientSignal(async (request, reply, signal) => {
      const { query } = request;
      const namespace = query.namespace === '' ? undefined : query.namespace;
      const segments = checkSegments({ resource: query.resource, namespace, name: query.name });
      const ctx = await toolRequest(app, request, reply, signal);
      const { conn, principal } = ctx;
      const resolved = await conn.resolveResource(segments.resource);
      if (!resolved) throw new NotFoundError(`resource not found on cluster ${conn.name}: ${segments.resource}`);
      const target = planTarget(resolved, { ...segments, namespace: segments.namespace ?? '_all' });
      requireAccess(app.services.auth, principal, conn.name, target.resource, target.namespace, 'get');
      await app.services.hostGuard.check(conn, {
        resolved,
        namespace: target.namespace,
        name: target.name,
        verb: 'get',
      });

      const coreEvents = await conn.resolveResource('events');
      if (!coreEvents || coreEvents.group !== '')
        throw new NotFoundError(`cluster ${conn.name} serves no core/v1 events`);
      const eventsApi = await conn.resolveResource('events.events.k8s.io');
      const eventsNamespace = target.namespace;
      requireAccess(app.services.auth, principal, conn.name, 'events', eventsNamespace, 'list');
      await app.services.hostGuard.check(conn, {
        resolved: coreEvents,
        namespace: eventsNamespace,
        name: undefined,
        verb: 'list',
      });
      const guardSelector =
        eventsNamespace === undefined
          ? await app.services.hostGuard.listFieldSelector(conn, coreEvents, undefined)
          : undefined;
      return objectEvents(ctx, {
        resolved,
        namespace: target.namespace,
        name: target.name!,
        eventsNamespace,
        guardSelector,
        eventsApi,
        coreEvents,
      });
    }),
  );
}
