// A PUT of an object that does not exist creates it, for every kind whose registry allows create on
// update (Kubernetes 1.35: Roles, RoleBindings, ClusterRoles, ClusterRoleBindings, Leases,
// LeaseCandidates, Endpoints, Events, LimitRanges, Services, RuntimeClasses; an aggregated API server
// decides for its own kinds), and the API server authorizes it as `update` only. kiteline does not
// let a PUT create for a caller whose roles allow update but not create: it reads the object first
// (with the caller's upstream headers, so kiteline's credential or the caller's impersonation) and
// refuses with 403 when it is missing. Checked for every kind, not a list, since which kinds create
// on update depends on the cluster's version and on aggregated API servers; callers who may create
// (admins) pay nothing. The resource routes also pin the object's uid into the body (a precondition
// the API server checks), so an object deleted between the read and the PUT is not created either.
import type { Principal } from '../auth/principal.js';
import type { ClusterConnection } from '../clusters/types.js';
import { ForbiddenError } from '../errors.js';
import { callerLabel, type Authorizer } from './access.js';
import { ALL_NAMESPACES } from './segments.js';
import { errorFromResponse, readJson } from './upstream.js';

export interface ReplaceTarget {
  conn: ClusterConnection;
  /** The name roles match ("roles", "leases", "widgets.example.com"). */
  resource: string;
  /** undefined for cluster-scoped kinds. */
  namespace: string | undefined;
  name: string;
  /** The object's path on the cluster (no query, no subresource). */
  objectPath: string;
  /** The upstream headers of the caller's own request (impersonation). */
  headers: Record<string, string | string[]>;
  signal?: AbortSignal;
}

/**
 * Nothing when the caller's roles allow create; otherwise the uid of the object the PUT replaces, or
 * 403 when there is none (the PUT would create it).
 */
export async function requireReplacedObject(
  auth: Authorizer,
  principal: Principal,
  target: ReplaceTarget,
): Promise<string | undefined> {
  const { conn, resource, namespace, name } = target;
  const access = { cluster: conn.name, namespace: namespace ?? ALL_NAMESPACES, resource, verb: 'create' as const };
  if (auth.authorize(principal, access)) return undefined;
  const res = await conn.request({
    method: 'GET',
    path: target.objectPath,
    headers: { ...target.headers, accept: 'application/json' },
    signal: target.signal,
  });
  if (res.statusCode === 404) {
    res.resume();
    const where = namespace === undefined ? '' : ` in namespace ${namespace}`;
    const who = callerLabel(principal);
    throw new ForbiddenError(
      `${who} may not create ${resource}${where} on cluster ${conn.name}: ${name} does not exist, ` +
        'and a PUT would create it',
    );
  }
  if (res.statusCode < 200 || res.statusCode >= 300) throw await errorFromResponse(res);
  const object = await readJson<{ metadata?: { uid?: unknown } }>(res);
  return typeof object.metadata?.uid === 'string' ? object.metadata.uid : undefined;
}
