// Reading objects as a caller, in one place for every door that is not the resource routes' raw
// passthrough: the describe and related-objects routes and the MCP tools. A read resolves the
// resource through the cluster's discovery, is authorized by kiteline's roles (get or list, with the
// namespace actually read) and by the host guard (kiteline's own namespace and group stay out, and a
// list across all namespaces on the host leaves the install namespace out upstream), and goes to the
// cluster with the caller's impersonation. Answers are read whole: callers bound what they keep.
import type { Principal } from '../auth/principal.js';
import type { ResolvedResource } from '../clusters/types.js';
import { NotFoundError } from '../errors.js';
import { requireAccess, type Authorizer } from './access.js';
import { getJson, type KubeList, type KubeObject, type ToolContext } from './calls.js';
import type { HostGuard } from './host-guard.js';
import { listSearch, withSearch } from './read-query.js';
import { checkSegments, type PathSegments } from './segments.js';
import { collectionPath, objectPath, planTarget, type ResourceTarget } from './target.js';

/** What a read needs besides the request: kiteline's roles and the host guard. */
export interface ReadKit {
  auth: Authorizer;
  hostGuard: HostGuard;
}

/** A read on one cluster, as one caller. */
export interface CallerContext extends ToolContext {
  principal: Principal;
}

/** The kind and scope a request names, checked and resolved on the cluster; unknown: 404. */
export async function resolveTarget(ctx: CallerContext, segments: PathSegments): Promise<ResourceTarget> {
  const checked = checkSegments(segments);
  const resolved = await ctx.conn.resolveResource(checked.resource);
  if (!resolved) throw new NotFoundError(`resource not found on cluster ${ctx.conn.name}: ${checked.resource}`);
  return planTarget(resolved, checked);
}

/** One object, after `get` on it is authorized; the cluster's 404 and 403 come through as they are. */
export async function readObject(
  kit: ReadKit,
  ctx: CallerContext,
  segments: PathSegments & { name: string },
): Promise<{ resolved: ResolvedResource; object: KubeObject }> {
  const target = await resolveTarget(ctx, segments);
  const { resolved } = target;
  requireAccess(kit.auth, ctx.principal, ctx.conn.name, target.resource, target.namespace, 'get');
  await kit.hostGuard.check(ctx.conn, { resolved, namespace: target.namespace, name: target.name, verb: 'get' });
  return { resolved, object: await getJson(ctx, objectPath(resolved, target.namespace, target.name!)) };
}

export interface ListOptions {
  labelSelector?: string;
  fieldSelector?: string;
  limit?: number;
}

/** A list of a namespace (or all namespaces), after `list` there is authorized. */
export async function listObjects(
  kit: ReadKit,
  ctx: CallerContext,
  segments: PathSegments,
  options: ListOptions = {},
): Promise<{ resolved: ResolvedResource; list: KubeList }> {
  const target = await resolveTarget(ctx, { ...segments, name: undefined });
  const { resolved, namespace } = target;
  requireAccess(kit.auth, ctx.principal, ctx.conn.name, target.resource, namespace, 'list');
  await kit.hostGuard.check(ctx.conn, { resolved, namespace, name: undefined, verb: 'list' });
  const fieldSelector = await kit.hostGuard.listFieldSelector(ctx.conn, resolved, namespace, options.fieldSelector);
  const search = listSearch({ labelSelector: options.labelSelector, fieldSelector, limit: options.limit });
  return { resolved, list: await getJson<KubeList>(ctx, withSearch(collectionPath(resolved, namespace), search)) };
}
