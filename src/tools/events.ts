// The events of one object (GET /api/v1/events/resources): what `kubectl describe` shows under
// "Events". Read from both APIs that serve them, core/v1 and events.k8s.io/v1 (the same storage
// today, but a cluster may carry events only one of them shows: both are read and merged by UID),
// selected by the object's kind, name and UID as kubectl does (so the events of an earlier object
// of the same name are not shown), and answered as a core/v1 EventList, newest first.
import type { ResolvedResource } from '../clusters/types.js';
import { HttpError, NotFoundError } from '../errors.js';
import { requireAccess } from '../cluster-access/access.js';
import { resolveTarget, type CallerContext, type ReadKit } from '../cluster-access/reads.js';
import type { PathSegments } from '../cluster-access/segments.js';
import { collectionPath, objectPath } from '../cluster-access/target.js';
import { withSearch } from '../cluster-access/read-query.js';
import { getJson, type KubeList, type KubeObject, type ToolContext } from '../cluster-access/calls.js';

/** At most this many events per API are read (a crash-looping pod keeps a few dozen). */
const EVENT_LIMIT = 500;

/** A core/v1 Event (the members the UI and the merge use). */
export interface CoreEvent extends KubeObject {
  type?: string;
  reason?: string;
  message?: string;
  count?: number;
  firstTimestamp?: string | null;
  lastTimestamp?: string | null;
  eventTime?: string | null;
  reportingComponent?: string;
  involvedObject?: Record<string, unknown>;
}

/** The answer: a core/v1 EventList. */
export interface EventListAnswer {
  apiVersion: 'v1';
  kind: 'EventList';
  metadata: Record<string, never>;
  items: CoreEvent[];
}

export interface EventsRequest {
  resolved: ResolvedResource;
  /** The object's namespace; undefined for a cluster-scoped kind. */
  namespace: string | undefined;
  name: string;
  /** The namespace events are listed in: the object's, or undefined (all) for a cluster-scoped kind. */
  eventsNamespace: string | undefined;
  /** A field selector the host guard adds to lists across all namespaces (or undefined). */
  guardSelector: string | undefined;
  /** events.k8s.io/v1 when the cluster serves it. */
  eventsApi: ResolvedResource | undefined;
  coreEvents: ResolvedResource;
}

/** An events.k8s.io/v1 Event turned into the core/v1 shape the UI reads. */
export function toCoreEvent(e: KubeObject): CoreEvent {
  const series = e.series as { count?: number; lastObservedTime?: string } | undefined;
  return {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: e.metadata ?? {},
    involvedObject: (e.regarding as Record<string, unknown>) ?? {},
    reason: e.reason as string | undefined,
    message: e.note as string | undefined,
    type: e.type as string | undefined,
    count: series?.count ?? (e.deprecatedCount as number | undefined) ?? 1,
    firstTimestamp: (e.deprecatedFirstTimestamp as string | undefined) ?? null,
    lastTimestamp: series?.lastObservedTime ?? (e.deprecatedLastTimestamp as string | undefined) ?? null,
    eventTime: (e.eventTime as string | undefined) ?? null,
    reportingComponent: (e.reportingController as string | undefined) ?? '',
    source: {
      component:
        (e.deprecatedSource as { component?: string } | undefined)?.component ??
        (e.reportingController as string | undefined) ??
        '',
    },
  };
}

/** When an event last happened (for the newest-first order). */
function lastSeen(e: CoreEvent): number {
  const when = e.lastTimestamp || e.eventTime || e.firstTimestamp || e.metadata?.creationTimestamp;
  const ms = when ? Date.parse(when) : NaN;
  return Number.isNaN(ms) ? 0 : ms;
}

/**
 * The events of one object, as a caller. Authorized as `get` on the object's resource and `list`
 * on events where they are kept: the object's namespace, or all namespaces for a cluster-scoped
 * object (a Node's events live in "default"); the host guard applies to both, and a list across
 * all namespaces of the host leaves the install namespace out.
 */
export async function readObjectEvents(
  kit: ReadKit,
  ctx: CallerContext,
  segments: PathSegments & { name: string },
): Promise<EventListAnswer> {
  const { conn, principal } = ctx;
  const target = await resolveTarget(ctx, segments);
  const { resolved, namespace, name } = target;
  requireAccess(kit.auth, principal, conn.name, target.resource, namespace, 'get');
  await kit.hostGuard.check(conn, { resolved, namespace, name, verb: 'get' });
  const coreEvents = await conn.resolveResource('events');
  if (!coreEvents || coreEvents.group !== '') throw new NotFoundError(`cluster ${conn.name} serves no core/v1 events`);
  const eventsApi = await conn.resolveResource('events.events.k8s.io');
  requireAccess(kit.auth, principal, conn.name, 'events', namespace, 'list');
  await kit.hostGuard.check(conn, { resolved: coreEvents, namespace, name: undefined, verb: 'list' });
  const guardSelector = await kit.hostGuard.listFieldSelector(conn, coreEvents, namespace, undefined);
  return objectEvents(ctx, {
    resolved,
    namespace,
    name: segments.name,
    eventsNamespace: namespace,
    guardSelector,
    eventsApi,
    coreEvents,
  });
}

/** Lists the object's events; the object must exist (its read is the `get` check upstream too). */
export async function objectEvents(ctx: ToolContext, req: EventsRequest): Promise<EventListAnswer> {
  const object = await getJson(ctx, objectPath(req.resolved, req.namespace, req.name));
  const kind = object.kind || req.resolved.kind;
  const uid = object.metadata?.uid;
  const selector = (prefix: string) =>
    [
      req.guardSelector,
      `${prefix}.kind=${kind}`,
      `${prefix}.name=${req.name}`,
      ...(uid ? [`${prefix}.uid=${uid}`] : []),
    ]
      .filter(Boolean)
      .join(',');

  const core = await getJson<KubeList<CoreEvent>>(
    ctx,
    withSearch(
      collectionPath(req.coreEvents, req.eventsNamespace),
      new URLSearchParams({ fieldSelector: selector('involvedObject'), limit: String(EVENT_LIMIT) }),
    ),
  );
  const byUid = new Map<string, CoreEvent>();
  const unnamed: CoreEvent[] = [];
  for (const e of core.items ?? []) {
    if (e.metadata?.uid) byUid.set(e.metadata.uid, e);
    else unnamed.push(e);
  }
  if (req.eventsApi) {
    try {
      const modern = await getJson<KubeList>(
        ctx,
        withSearch(
          collectionPath(req.eventsApi, req.eventsNamespace),
          new URLSearchParams({ fieldSelector: selector('regarding'), limit: String(EVENT_LIMIT) }),
        ),
      );
      for (const e of modern.items ?? []) {
        const id = e.metadata?.uid;
        if (id && byUid.has(id)) continue;
        const converted = toCoreEvent(e);
        if (id) byUid.set(id, converted);
        else unnamed.push(converted);
      }
    } catch (err) {
      // An events.k8s.io answer that is refused or missing leaves the core events standing.
      if (!(err instanceof HttpError) || err.status >= 500) throw err;
    }
  }
  const items = [...byUid.values(), ...unnamed].sort((a, b) => lastSeen(b) - lastSeen(a));
  return { apiVersion: 'v1', kind: 'EventList', metadata: {}, items };
}
