// Which write route is which audited action: one table keyed by "METHOD /route/pattern" (trailing
// slash dropped) giving the verb, the resource, and the request fields (params, query, or a few
// named body fields: never the body itself) that name the object. Resource routes refine their
// entry with what they resolved (src/resources/audit.ts).
import type { FastifyRequest } from 'fastify';

/** The request fields an audit line may copy. Body fields are limited to these harmless names. */
export type AuditField =
  | 'params.id'
  | 'params.resource'
  | 'params.namespace'
  | 'params.name'
  | 'query.subject'
  | 'body.username'
  | 'body.name'
  | 'body.subject';

export interface AuditRoute {
  /** The action, or a function of the body for actions a body field decides (enable/disable). */
  verb: string | ((body: Record<string, unknown>) => string);
  /** The resource: fixed ('users'), or resourceField's value (resource routes). */
  resource?: string;
  resourceField?: AuditField;
  name?: AuditField;
  namespace?: AuditField;
  /** The user or other subject of an assignment. */
  subject?: AuditField;
  /** Resource routes: the target cluster is part of the action. */
  clusterScoped?: boolean;
  /**
   * The route audits each action itself, with what only it knows (POST /mcp: one record per tool
   * call); no record per request.
   */
  auditedByRoute?: boolean;
}

const USERS = '/api/v1/admin/users';
const ROLES = '/api/v1/admin/roles';
const APIKEYS = '/api/v1/admin/apikeys';
const CLUSTERS = '/api/v1/admin/clusters';
const TEMPLATES = '/api/v1/admin/templates';
const OAUTH_PROVIDERS = '/api/v1/admin/oauth-providers';
const RELEASES = '/api/v1/helmrelease';
const CHART_REPOSITORIES = '/api/v1/admin/chart-repositories';
const RELEASE = { resource: 'helmreleases', namespace: 'params.namespace', clusterScoped: true } as const;
const RESOURCE = { resourceField: 'params.resource', namespace: 'params.namespace', clusterScoped: true } as const;

export const AUDIT_ROUTES: Readonly<Record<string, AuditRoute>> = {
  // Sessions: logins (failed ones too), logouts and refreshes.
  'POST /api/auth/login/password': { verb: 'login', resource: 'sessions', name: 'body.username' },
  'POST /api/auth/login/ldap': { verb: 'login', resource: 'sessions', name: 'body.username' },
  // A GET, audited all the same: the OAuth callback signs a user in (the one GET in this table).
  'GET /api/auth/callback': { verb: 'login', resource: 'sessions' },
  'POST /api/auth/logout': { verb: 'logout', resource: 'sessions' },
  'POST /api/auth/refresh': { verb: 'refresh', resource: 'sessions' },
  // Second factors (routes/second-factors.ts): every change of one, sign-ins and step-ups with one.
  'POST /api/auth/login/mfa': { verb: 'login', resource: 'sessions' },
  'POST /api/auth/passkey/login/finish': { verb: 'login', resource: 'sessions' },
  'POST /api/auth/step-up': { verb: 'step-up', resource: 'sessions' },
  'POST /api/auth/step-up/passkey/finish': { verb: 'step-up', resource: 'sessions' },
  'POST /api/users/me/mfa/setup': { verb: 'setup', resource: 'totp' },
  'POST /api/users/me/mfa/enable': { verb: 'enable', resource: 'totp' },
  'POST /api/users/me/mfa/disable': { verb: 'disable', resource: 'totp' },
  'POST /api/users/me/mfa/recovery-codes': { verb: 'renew', resource: 'recovery-codes' },
  'POST /api/users/me/passkeys/begin': { verb: 'begin', resource: 'passkeys', name: 'body.name' },
  'POST /api/users/me/passkeys/finish': { verb: 'create', resource: 'passkeys', name: 'body.name' },
  'POST /api/auth/passkey/login/begin': { verb: 'begin', resource: 'sessions' },
  'POST /api/auth/step-up/passkey/begin': { verb: 'begin', resource: 'sessions' },
  'PUT /api/users/me/passkeys/:id': { verb: 'update', resource: 'passkeys', name: 'params.id' },
  'DELETE /api/users/me/passkeys/:id': { verb: 'delete', resource: 'passkeys', name: 'params.id' },
  [`DELETE ${USERS}/:id/mfa`]: { verb: 'reset', resource: 'second-factors', name: 'params.id' },
  // Users.
  [`POST ${USERS}/create_super_user`]: { verb: 'create_super_user', resource: 'users', name: 'body.username' },
  'POST /api/auth/setup/create_super_user': { verb: 'create_super_user', resource: 'users', name: 'body.username' },
  // AI agents: each tool call is one record of its own (src/mcp/server.ts); an initialize or a
  // tools/list is none.
  'POST /mcp': { verb: 'mcp', resource: 'mcp', auditedByRoute: true },
  // Only a 405 (no session to end): nothing happens to audit.
  'DELETE /mcp': { verb: 'mcp', resource: 'mcp', auditedByRoute: true },
  // The replicas' internal hop (routes/fleet-hop.ts): the replica that took the caller's request
  // audited it; the hop is that request's upstream leg, not another action.
  ...Object.fromEntries(
    ['POST', 'PUT', 'PATCH', 'DELETE'].flatMap((method) =>
      ['/internal/fleet/:object/k8s/*', '/internal/fleet/:object/k8s'].map((url) => [
        `${method} ${url}`,
        { verb: 'hop', resource: 'fleet', auditedByRoute: true },
      ]),
    ),
  ),
  'POST /internal/fleet/:object/first-probe': { verb: 'hop', resource: 'fleet', auditedByRoute: true },
  'POST /internal/fleet/:object/probe': { verb: 'hop', resource: 'fleet', auditedByRoute: true },
  [`POST ${USERS}`]: { verb: 'create', resource: 'users', name: 'body.username' },
  [`PUT ${USERS}/:id`]: { verb: 'update', resource: 'users' },
  [`DELETE ${USERS}/:id`]: { verb: 'delete', resource: 'users' },
  [`POST ${USERS}/:id/reset_password`]: { verb: 'reset_password', resource: 'users' },
  [`POST ${USERS}/:id/enable`]: { verb: (body) => (body.enabled === false ? 'disable' : 'enable'), resource: 'users' },
  // Roles.
  [`POST ${OAUTH_PROVIDERS}`]: { verb: 'create', resource: 'oauthproviders', name: 'body.name' },
  [`PUT ${OAUTH_PROVIDERS}/:id`]: { verb: 'update', resource: 'oauthproviders' },
  [`DELETE ${OAUTH_PROVIDERS}/:id`]: { verb: 'delete', resource: 'oauthproviders' },
  [`POST ${ROLES}`]: { verb: 'create', resource: 'roles', name: 'body.name' },
  [`PUT ${ROLES}/:id`]: { verb: 'update', resource: 'roles' },
  [`DELETE ${ROLES}/:id`]: { verb: 'delete', resource: 'roles' },
  [`POST ${ROLES}/:id/assign`]: { verb: 'assign', resource: 'roles', subject: 'body.subject' },
  [`DELETE ${ROLES}/:id/assign`]: { verb: 'unassign', resource: 'roles', subject: 'query.subject' },
  // API keys.
  [`POST ${APIKEYS}`]: { verb: 'create', resource: 'apikeys', name: 'body.name' },
  [`DELETE ${APIKEYS}/:id`]: { verb: 'delete', resource: 'apikeys' },
  // Clusters (the route adds the cluster's name where the request does not carry it).
  [`POST ${CLUSTERS}`]: { verb: 'create', resource: 'clusters', name: 'body.name' },
  [`PUT ${CLUSTERS}/:id`]: { verb: 'update', resource: 'clusters' },
  [`DELETE ${CLUSTERS}/:id`]: { verb: 'delete', resource: 'clusters' },
  [`POST ${CLUSTERS}/import`]: { verb: 'import', resource: 'clusters' },
  // Resource templates, and a user's own sidebar preference.
  [`POST ${TEMPLATES}`]: { verb: 'create', resource: 'templates', name: 'body.name' },
  [`PUT ${TEMPLATES}/:id`]: { verb: 'update', resource: 'templates' },
  [`DELETE ${TEMPLATES}/:id`]: { verb: 'delete', resource: 'templates' },
  // Helm releases (each call helm makes is audited again, as the user's, by the Kubernetes API door).
  [`POST ${RELEASES}/:namespace`]: { verb: 'install', ...RELEASE, name: 'body.name' },
  [`POST ${RELEASES}/:namespace/:name/upgrade`]: { verb: 'upgrade', ...RELEASE, name: 'params.name' },
  [`POST ${RELEASES}/:namespace/:name/rollback`]: { verb: 'rollback', ...RELEASE, name: 'params.name' },
  [`PUT ${RELEASES}/:namespace/:name/upgrade`]: { verb: 'upgrade', ...RELEASE, name: 'params.name' },
  [`PUT ${RELEASES}/:namespace/:name/rollback`]: { verb: 'rollback', ...RELEASE, name: 'params.name' },
  [`DELETE ${RELEASES}/:namespace/:name`]: { verb: 'uninstall', ...RELEASE, name: 'params.name' },
  [`POST ${CHART_REPOSITORIES}`]: { verb: 'create', resource: 'chartrepositories', name: 'body.name' },
  [`PUT ${CHART_REPOSITORIES}/:name`]: { verb: 'update', resource: 'chartrepositories', name: 'params.name' },
  [`DELETE ${CHART_REPOSITORIES}/:name`]: { verb: 'delete', resource: 'chartrepositories', name: 'params.name' },
  'POST /api/users/sidebar_preference': { verb: 'update', resource: 'sidebar_preferences' },
  // Settings (one object each).
  'PUT /api/v1/admin/general-setting': { verb: 'update', resource: 'generalsettings' },
  'PUT /api/v1/admin/ldap-setting': { verb: 'update', resource: 'ldapsettings' },
  'POST /api/v1/admin/sidebar_preference/global': { verb: 'update', resource: 'sidebar_preferences/global' },
  'DELETE /api/v1/admin/sidebar_preference/global': { verb: 'delete', resource: 'sidebar_preferences/global' },
  // The resource gateway.
  'POST /api/v1/:resource/:namespace': { verb: 'create', ...RESOURCE },
  'PUT /api/v1/:resource/:namespace/:name': { verb: 'update', ...RESOURCE, name: 'params.name' },
  'PATCH /api/v1/:resource/:namespace/:name': { verb: 'patch', ...RESOURCE, name: 'params.name' },
  'DELETE /api/v1/:resource/:namespace/:name': { verb: 'delete', ...RESOURCE, name: 'params.name' },
  // The resource route names the subresource itself ("pods/resize") in the request's audit detail.
  'PATCH /api/v1/:resource/:namespace/:name/:subresource': { verb: 'patch', ...RESOURCE, name: 'params.name' },
  // Resource tools (routes/tools.ts): apply adds one line per document, drain one per pod.
  'POST /api/v1/resources/apply': { verb: 'apply', resource: 'documents', clusterScoped: true },
  'POST /api/v1/:resource/:namespace/:name/rollback': { verb: 'rollback', ...RESOURCE, name: 'params.name' },
  'POST /api/v1/nodes/_all/:name/cordon': {
    verb: 'cordon',
    resource: 'nodes',
    name: 'params.name',
    clusterScoped: true,
  },
  'POST /api/v1/nodes/_all/:name/uncordon': {
    verb: 'uncordon',
    resource: 'nodes',
    name: 'params.name',
    clusterScoped: true,
  },
  'POST /api/v1/nodes/_all/:name/taint': { verb: 'taint', resource: 'nodes', name: 'params.name', clusterScoped: true },
  'POST /api/v1/nodes/_all/:name/untaint': {
    verb: 'untaint',
    resource: 'nodes',
    name: 'params.name',
    clusterScoped: true,
  },
  'POST /api/v1/nodes/_all/:name/drain': { verb: 'drain', resource: 'nodes', name: 'params.name', clusterScoped: true },
  // Pod files (routes/pod-files.ts fills in cluster, namespace, pod and the file's path as subject).
  'PUT /api/v1/pods/:namespace/:pod/files/upload': { verb: 'upload', resource: 'pods/files', clusterScoped: true },
  // Kubeconfigs (each mints a token, an API key owned by the caller).
  'POST /api/v1/kubeconfig': { verb: 'create', resource: 'kubeconfigs' },
  'POST /api/v1/mcp/token': { verb: 'create', resource: 'mcp-tokens' },
  'DELETE /api/users/me/kubeconfig-tokens/:id': { verb: 'delete', resource: 'kubeconfig-tokens' },
  'DELETE /api/v1/admin/kubeconfig-tokens/:id': { verb: 'delete', resource: 'kubeconfig-tokens' },
  // The Kubernetes API proxy (the route fills in what the request info says).
  'POST /k8s/clusters/*': { verb: 'create', clusterScoped: true },
  'PUT /k8s/clusters/*': { verb: 'update', clusterScoped: true },
  'PATCH /k8s/clusters/*': { verb: 'patch', clusterScoped: true },
  'DELETE /k8s/clusters/*': { verb: 'delete', clusterScoped: true },
  // Pod and service proxies (routes/workload-proxy.ts fills in cluster, resource, namespace, name).
  ...Object.fromEntries(
    ['POST', 'PUT', 'PATCH', 'DELETE'].flatMap((method) =>
      ['pods', 'services'].flatMap((kind) =>
        ['', '/*'].map((rest) => [
          `${method} /api/v1/namespaces/:namespace/${kind}/:name/proxy${rest}`,
          { verb: 'create', resource: `${kind}/proxy` },
        ]),
      ),
    ),
  ),
};

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export function isWriteMethod(method: string): boolean {
  return WRITE_METHODS.has(method);
}

/** The table key of a route: "POST /api/v1/admin/users" for both "/users" and "/users/". */
export function auditKey(method: string, url: string): string {
  return `${method} ${url.length > 1 ? url.replace(/\/+$/, '') : url}`;
}

/** Longest value copied from a request into an audit line. */
const MAX_FIELD = 253;

/** A field's value when it is a non-empty string (cut to MAX_FIELD), else undefined. */
export function auditField(request: FastifyRequest, field: AuditField | undefined): string | undefined {
  if (!field) return undefined;
  const [where, key] = field.split('.') as ['params' | 'query' | 'body', string];
  const source = request[where] as Record<string, unknown> | undefined;
  const value = source && typeof source === 'object' ? source[key] : undefined;
  return typeof value === 'string' && value !== '' ? value.slice(0, MAX_FIELD) : undefined;
}
