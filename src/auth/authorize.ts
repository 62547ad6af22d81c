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

/**
 * A role that names the resource itself (not through a wildcard) allows the access: what reaches
 * a feature that is admin-only unless a role opens it on purpose (session recordings: `sessions`),
 * so that a role of every resource, the viewer's, does not open it by accident.
 */
export function rolesAllowNamed(roles: Iterable<RoleRules>, access: AccessRequest): boolean {
  for (const role of roles) if (role.resources?.includes(access.resource) && roleAllows(role, access)) return true;
  return false;
}

/** Some role names the resource itself (rolesAllowNamed) and can allow something. */
export function rolesNameResource(roles: Iterable<RoleRules>, resource: string): boolean {
  for (const role of roles) if (grantsSomething(role) && role.resources?.includes(resource)) return true;
  return false;
}

/** Rules with a role's MCP block (an agent's extra limits). */
export type AgentRoleRules = RoleRules & Pick<RoleSpec, 'mcp'>;

/** Some role denies agents this tool (`denyTools`) or resource (`denyResources`): a deny wins over every other role. */
export function agentDenied(
  roles: Iterable<AgentRoleRules>,
  list: 'denyTools' | 'denyResources',
  value: string,
): boolean {
  for (const role of roles) {
    const denied = role.mcp?.[list];
    if (denied?.length && patternsMatch(denied, value)) return true;
  }
  return false;
}

/**
 * An agent's write runs without asking a human when a role that grants it says so
 * (mcp.confirmWrites: false); by default every write asks.
 */
export function agentWriteUnconfirmed(roles: Iterable<AgentRoleRules>, access: AccessRequest): boolean {
  for (const role of roles) if (role.mcp?.confirmWrites === false && roleAllows(role, access)) return true;
  return false;
}

/** A role whose four lists are all non-empty: it can allow something (an empty list matches nothing). */
function grantsSomething(role: RoleRules): boolean {
  return [role.clusters, role.namespaces, role.resources, role.verbs].every((list) => (list?.length ?? 0) > 0);
}

/** Some role grants this verb anywhere (what decides whether an agent is shown a write tool at all). */
export function rolesGrantVerb(roles: Iterable<RoleRules>, verb: string): boolean {
  for (const role of roles) if (grantsSomething(role) && patternsMatch(role.verbs, verb)) return true;
  return false;
}

/** Some role reaches the cluster at all (what GET /api/v1/clusters lists): it matches the cluster
 * and can do something (its other lists are not empty). */
export function rolesReachCluster(roles: Iterable<RoleRules>, cluster: string): boolean {
  for (const role of roles) if (grantsSomething(role) && patternsMatch(role.clusters, cluster)) return true;
  return false;
}
