// GET /api/v1/events/resources?resource=&name=&namespace=: the events of one object (Kite's
// route and answer, a core/v1 EventList, newest first), read and authorized by
// tools/events.ts readObjectEvents (MCP's resource_events uses the same).
import { Type } from 'typebox';
import {
  checkSegments,
  NAME_PATTERN,
  OPTIONAL_NAMESPACE_PATTERN,
  RESOURCE_PATTERN,
} from '../../cluster-access/segments.js';
import { readObjectEvents } from '../../tools/events.js';
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
      pattern: OPTIONAL_NAMESPACE_PATTERN,
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
      return readObjectEvents(app.services, ctx, { ...segments, name: query.name });
    }),
  );
}
