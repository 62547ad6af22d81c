// The JSON of the identity routes (docs/auth.md): User, Role, APIKey, and the caller
// of GET /api/auth/user. Answer shaping for the gateway's routes (not authentication, so not in
// auth/): a store object in, the JSON a client sees out. Never a password, hash or key. Each view
// is typed with its shape's type (gateway/schemas.ts), so a view that drifts from its schema does
// not compile.
import type { Principal } from '../../auth/principal.js';
import { creationTime } from '../../host/cache-index.js';
import { apiKeyName } from '../../host/apikeys.js';
import { managedByOf } from '../../host/gitops.js';
import { isBuiltinRole, roleGroups, roleName } from '../../host/roles.js';
import { userGroups, userProvider } from '../../host/users.js';
import { providerName } from '../../host/oauth-providers.js';
import {
  resourceId,
  type APIKeyResource,
  type OAuthProviderResource,
  type RoleResource,
  type UserResource,
} from '../../host/resources.js';
import type {
  APIKeyView,
  KubeconfigTokenView,
  OAuthProviderView,
  RoleAssignmentView,
  RoleView,
  SessionUserView,
  UserView,
} from '../schemas.js';

export type RoleLookup = (name: string) => RoleResource | undefined;

/**
 * A user; `roleNames` are the roles it holds (by default those assigned to it; the caller passes
 * the effective roles, group assignments included, where it has them).
 */
export function userView(
  user: UserResource,
  roleByName: RoleLookup,
  roleNames: readonly string[] = user.spec.roles ?? [],
): UserView {
  const roles: UserView['roles'] = [];
  for (const name of roleNames) {
    const role = roleByName(name);
    const id = role ? resourceId(role) : undefined;
    if (id !== undefined && !roles.some((r) => r.name === name)) roles.push({ id, name });
  }
  const managedBy = managedByOf(user);
  return {
    ...(managedBy ? { managedBy } : {}),
    id: resourceId(user)!,
    username: user.spec.username,
    name: user.spec.name ?? '',
    avatar_url: user.spec.avatarURL ?? '',
    provider: userProvider(user),
    enabled: user.spec.enabled !== false,
    createdAt: creationTime(user),
    lastLoginAt: user.status?.lastLoginAt ?? null,
    roles,
    sidebar_preference: user.spec.sidebarPreference ?? '',
    oidc_groups: userGroups(user),
  };
}

export function roleView(role: RoleResource, holders: readonly UserResource[]): RoleView {
  const id = resourceId(role)!;
  const name = roleName(role);
  const managedBy = managedByOf(role);
  return {
    ...(managedBy ? { managedBy } : {}),
    id,
    name,
    description: role.spec?.description ?? '',
    isSystem: isBuiltinRole(name),
    clusters: role.spec?.clusters ?? [],
    namespaces: role.spec?.namespaces ?? [],
    resources: role.spec?.resources ?? [],
    verbs: role.spec?.verbs ?? [],
    createdAt: creationTime(role),
    assignments: [
      ...holders
        .filter((u) => (u.spec.roles ?? []).includes(name))
        .map((u): RoleAssignmentView => ({ roleId: id, subjectType: 'user', subject: u.spec.username })),
      ...roleGroups(role).map((g): RoleAssignmentView => ({ roleId: id, subjectType: 'group', subject: g })),
    ],
  };
}

/** An OAuth provider: never its client secret ("***" when one is stored). */
export function oauthProviderView(provider: OAuthProviderResource): OAuthProviderView {
  const spec = provider.spec;
  return {
    id: resourceId(provider)!,
    name: providerName(provider),
    clientId: spec.clientId ?? '',
    clientSecret: spec.clientSecretRef ? '***' : '',
    issuer: spec.issuer ?? '',
    authUrl: spec.authUrl ?? '',
    tokenUrl: spec.tokenUrl ?? '',
    userInfoUrl: spec.userInfoUrl ?? '',
    scopes: spec.scopes ?? '',
    usernameClaim: spec.usernameClaim ?? '',
    groupsClaim: spec.groupsClaim ?? '',
    allowedGroups: spec.allowedGroups ?? '',
    enabled: spec.enabled !== false,
    createdAt: creationTime(provider),
  };
}

export function apiKeyView(key: APIKeyResource): APIKeyView {
  return {
    id: resourceId(key)!,
    name: apiKeyName(key),
    roles: key.spec.roles ?? [],
    expiresAt: key.spec.expiresAt ?? null,
    createdAt: creationTime(key),
    lastUsedAt: key.status?.lastUsedAt ?? null,
    createdBy: key.spec.createdBy ?? '',
  };
}

/** A kubeconfig token as its owner sees it (Kite's /api/users/me/kubeconfig-tokens), and with its owner for admins. */
export function kubeconfigTokenView(key: APIKeyResource, withOwner = false): KubeconfigTokenView {
  const owner = key.spec.owner!;
  return {
    id: resourceId(key)!,
    name: apiKeyName(key),
    roles: key.spec.roles ?? [],
    createdAt: creationTime(key),
    expiresAt: key.spec.expiresAt ?? '',
    lastUsedAt: key.status?.lastUsedAt ?? null,
    audience: key.spec.audience ?? 'kubernetes',
    ...(key.spec.clusters ? { clusters: key.spec.clusters } : {}),
    ...(withOwner ? { ownerId: owner.id, owner: owner.username } : {}),
  };
}

/** An API key calling GET /api/auth/user: a user-like record with provider "api_key" (as Kite does). */
export function apiKeyCallerView(
  principal: Principal,
  key: APIKeyResource | undefined,
  roleByName: RoleLookup,
): SessionUserView {
  return {
    id: principal.id,
    username: principal.name,
    name: principal.name,
    avatar_url: '',
    provider: 'api_key',
    enabled: true,
    createdAt: key ? creationTime(key) : null,
    lastLoginAt: key?.status?.lastUsedAt ?? null,
    roles: principal.roles
      .map((name) => ({ name, role: roleByName(name) }))
      .filter((r) => r.role)
      .map((r) => ({ id: resourceId(r.role!)!, name: r.name })),
    sidebar_preference: '',
    oidc_groups: [],
  };
}
