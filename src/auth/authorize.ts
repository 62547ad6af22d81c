// The one authorization rule: a request is allowed when ONE of the caller's roles matches its
// cluster, namespace, resource and verb (docs/auth.md). Pure functions over role specs;
// AuthService feeds them the roles from the host cache.
import type { RoleSpec } from '../host/resources.js';
import { patternsMatch } from './patterns.js';
import type { AccessRequest } from './principal.js';

export type RoleRules = Pick<RoleSpec, 'clusters' | 'namespaces' | 'resources' | 'verbs'>;

export function roleAllows(role: RoleRules, access: AccessRequest): boolean {
  return (
    patternsMatch(role.verbs, access.verb) &&
    patternsMatch(role.clusters, access.cluster) &&
    patternsMatch(role.resources, access.resource) &&
    patternsMatch(role.namespaces, access.namespace)
  );
}

export function rolesAllow(roles: Iterable<RoleRules>, access: AccessRequest): boolean {
  for (const role of roles) if (roleAllows(role, access)) return true;
  return false;
}

/** Some role reaches the cluster at all (what GET /api/v1/clusters lists): it matches the cluster
 * and can do something (its other lists are not empty). */
export function rolesReachCluster(roles: Iterable<RoleRules>, cluster: string): boolean {
  for (const role of roles) {
    const grantsSomething = [role.namespaces, role.resources, role.verbs].every((list) => (list?.length ?? 0) > 0);
    if (grantsSomething && patternsMatch(role.clusters, cluster)) return true;
  }
  return false;
}
