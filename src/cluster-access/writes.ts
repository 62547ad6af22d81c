// Writing objects as a caller, for the doors that are not the resource routes' raw passthrough
// (the MCP tools). The same rules as the resource routes: the resource is resolved through the
// cluster's discovery, the write is authorized by kiteline's roles as what it is (a subresource as
// "deployments/scale"), then by the host guard (kiteline's own namespace and group stay out), a
// node that runs kiteline on its host is never deleted or given a NoExecute taint, and the request
// goes to the cluster with the caller's impersonation. `dryRun` asks the cluster what the write
// would do (dryRun=All: its validation, admission and defaults) and writes nothing.
import type { Verb } from '../auth/principal.js';
import { PATCH_CONTENT_TYPES, preparePatch, type PatchType } from './patch.js';
import { requireAccess } from './access.js';
import { writeJson, type KubeObject } from './calls.js';
import { isNodes, refuseEvictingWrite, refuseOnKitelineNode } from './kiteline-node.js';
import { withSearch } from './read-query.js';
import { resolveTarget, type CallerContext, type ReadKit } from './reads.js';
import type { PathSegments } from './segments.js';
import { objectPath, type ResourceTarget } from './target.js';

/** The field manager of the writes kiteline makes for a caller (as `kubectl` names its own). */
export const WRITE_FIELD_MANAGER = 'kiteline';

/** One object a write names; `subresource` writes that part of it (scale, status). */
export type WriteSegments = PathSegments & { name: string; subresource?: 'scale' | 'status' };

/** The object a write resolved to, as roles name it (a subresource as "deployments/scale"). */
export interface WriteTarget extends ResourceTarget {
  name: string;
  /** The object's path on the API server, with the subresource. */
  path: string;
}

/** Resolves the object a write names and authorizes `verb` on it (roles, then the host guard). */
export async function authorizeWrite(
  kit: ReadKit,
  ctx: CallerContext,
  segments: WriteSegments,
  verb: Verb,
): Promise<WriteTarget> {
  const target = await resolveTarget(ctx, segments);
  const { subresource } = segments;
  const resource = subresource ? `${target.resource}/${subresource}` : target.resource;
  requireAccess(kit.auth, ctx.principal, ctx.conn.name, resource, target.namespace, verb);
  await kit.hostGuard.check(ctx.conn, {
    resolved: target.resolved,
    namespace: target.namespace,
    name: segments.name,
    verb,
    subresource,
  });
  const path = objectPath(target.resolved, target.namespace, segments.name);
  return { ...target, resource, name: segments.name, path: subresource ? `${path}/${subresource}` : path };
}

/** A patch of an authorized object: the cluster's answer (the object as patched, or as it would be). */
export async function patchObject(
  kit: ReadKit,
  ctx: CallerContext,
  target: WriteTarget,
  type: Exclude<PatchType, 'apply'>,
  patch: unknown,
  dryRun: boolean,
): Promise<KubeObject> {
  const body = preparePatch(type, patch, {
    resource: target.resource,
    namespace: target.namespace,
    name: target.name,
    fieldManager: WRITE_FIELD_MANAGER,
  });
  const send = (dry: boolean) => {
    const search = new URLSearchParams({ fieldManager: WRITE_FIELD_MANAGER });
    if (dry) search.set('dryRun', 'All');
    return writeJson(ctx, 'PATCH', withSearch(target.path, search), PATCH_CONTENT_TYPES[type], body, target.path);
  };
  // A node's own patch (not a subresource) must not add a NoExecute taint where kiteline runs.
  if (!dryRun && isNodes(target.resolved) && !target.resource.includes('/'))
    await refuseEvictingWrite(kit.hostGuard, ctx.conn, target.name, () => send(true), ctx.signal);
  return send(dryRun);
}

/**
 * A delete of an authorized object, in the background (its dependents follow, as `kubectl delete`
 * does): the cluster's answer (the object, or a Status).
 */
export async function deleteObject(
  kit: ReadKit,
  ctx: CallerContext,
  target: WriteTarget,
  dryRun: boolean,
): Promise<KubeObject> {
  if (isNodes(target.resolved)) await refuseOnKitelineNode(kit.hostGuard, ctx.conn, target.name, 'delete', ctx.signal);
  // dryRun in the body: the API server takes a DELETE's options from its body, query or not.
  const options = {
    kind: 'DeleteOptions',
    apiVersion: 'v1',
    propagationPolicy: 'Background',
    ...(dryRun ? { dryRun: ['All'] } : {}),
  };
  return writeJson(ctx, 'DELETE', target.path, 'application/json', options, target.path);
}
