// The role store: Role custom resources named objectNameFor('role', name), so the atomic create
// decides name uniqueness. The kind's rules, each one operation here:
//   - built-in `admin` (everything) and `viewer` (get, list, watch on everything but Secrets, like
//     Kubernetes' own `view` role) are created at start when missing, restored (or upgraded from an
//     older release's rules) when they differ, and cannot be changed or deleted through the API
//     (403);
//   - a role is never renamed (400: create a new one and move the assignments);
//   - deleting a role takes it from every user and API key holding it, so a later role of the
//     same name grants nothing by surprise;
//   - assigning and unassigning go to the user store (taking admin from the last enabled admin
//     is its 409).
// Reads come from the watch-backed cache (KindStore); every write returns once this replica's
// cache shows it.
import { BadRequestError, ConflictError, ForbiddenError } from '../errors.js';
import type { Logger } from '../log.js';
import type { APIKeyStore } from './apikeys.js';
import { refuseGitOpsManaged } from './gitops.js';
import { groupSubject, isBareGroupSubject, resolveGroupSubject } from './group-subjects.js';
import { describeApiError } from './host-errors.js';
import type { IdAllocator } from './ids.js';
import { KindStore, sameList } from './kind-store.js';
import { objectNameFor } from './names.js';
import { resourceId, type RoleResource, type RoleSpec } from './resources.js';
import type { HostStore } from './store.js';
import { GROUPS_ANNOTATION, groupsIn, type UserStore } from './users.js';

export const BUILTIN_LABEL = 'kiteline.io/builtin';
export const ADMIN_ROLE = 'admin';
export const VIEWER_ROLE = 'viewer';

export type RoleRulesInput = Required<Pick<RoleSpec, 'clusters' | 'namespaces' | 'resources' | 'verbs'>>;
/** What a role's owner may set: its description and its four pattern lists. */
export type RoleChanges = Partial<Pick<RoleSpec, 'description' | 'clusters' | 'namespaces' | 'resources' | 'verbs'>>;

const RULE_FIELDS = ['clusters', 'namespaces', 'resources', 'verbs'] as const;

export const BUILTIN_ROLES: Record<string, RoleRulesInput & { description: string }> = {
  [ADMIN_ROLE]: {
    description: 'Everything on every cluster, and the admin routes',
    clusters: ['*'],
    namespaces: ['*'],
    resources: ['*'],
    verbs: ['*'],
  },
  // Not Secrets: reading them is reading every credential they hold (service-account tokens,
  // registry passwords, TLS keys), which is why Kubernetes' `view` role leaves them out too.
  [VIEWER_ROLE]: {
    description: 'Read-only (get, list, watch) on every cluster, except Secrets',
    clusters: ['*'],
    namespaces: ['*'],
    resources: ['*', '!secrets'],
    verbs: ['get', 'list', 'watch'],
  },
};

export function roleName(role: RoleResource): string {
  return role.spec?.name || role.metadata.name;
}

/**
 * The identity-provider groups a role is assigned to (Kite's subjectType "group"), as group subjects
 * (`oidc:<provider>/<group>`, `ldap/<group>`: group-subjects.ts): the annotation kiteline.io/groups,
 * a JSON array, in metadata so that every version of the Role schema keeps it.
 */
export function roleGroups(role: RoleResource): string[] {
  return groupsIn(role.metadata.annotations);
}

export function isBuiltinRole(name: string): boolean {
  return Object.hasOwn(BUILTIN_ROLES, name);
}

export class RoleStore extends KindStore<RoleResource> {
  constructor(
    host: HostStore,
    ids: IdAllocator,
    private readonly log: Logger,
    /** The holders of roles: assignments live on users, and keys carry roles too. */
    private readonly holders: { users: UserStore; apiKeys: APIKeyStore },
  ) {
    super(host, ids, { plural: 'roles', kind: 'Role', noun: 'role', keyOf: roleName, cache: (h) => h.roles });
    this.cache.on('delete', (role) => {
      if (isBuiltinRole(roleName(role))) void this.ensureBuiltins().catch(() => undefined);
    });
  }

  byName(name: string): RoleResource | undefined {
    return this.byKey(name);
  }

  /** Creates missing built-in roles and restores edited ones (any replica; conflicts are fine). */
  async ensureBuiltins(): Promise<void> {
    for (const [name, rules] of Object.entries(BUILTIN_ROLES)) {
      const existing = this.byName(name);
      try {
        if (!existing) {
          await this.insert(name, rules, true);
        } else if (!RULE_FIELDS.every((f) => sameList(existing.spec?.[f], rules[f]))) {
          await this.patch(existing, { spec: { ...rules } });
          this.log.warn({ role: name }, 'restored the rules of a built-in role');
        }
      } catch (err) {
        if (!(err instanceof ConflictError))
          this.log.warn({ role: name, err: describeApiError(err) }, 'could not ensure built-in role');
      }
    }
  }

  /** Creates a role; 409 AlreadyExists when the name is taken (also under races). */
  async create(name: string, spec: RoleChanges): Promise<RoleResource> {
    return this.insert(name, spec, false);
  }

  private async insert(name: string, spec: RoleChanges, builtin: boolean): Promise<RoleResource> {
    return this.createWithId(name, () => ({
      metadata: { name: objectNameFor('role', name), ...(builtin ? { labels: { [BUILTIN_LABEL]: 'true' } } : {}) },
      spec: {
        name,
        ...(spec.description ? { description: spec.description } : {}),
        clusters: spec.clusters ?? [],
        namespaces: spec.namespaces ?? [],
        resources: spec.resources ?? [],
        verbs: spec.verbs ?? [],
      },
    }));
  }

  /**
   * Changes a role's description or rules (only the fields given). Built-in roles: 403; a `name`
   * other than the role's own: 400 (roles are not renamed).
   */
  async update(role: RoleResource, changes: RoleChanges & { name?: string }): Promise<RoleResource> {
    const name = roleName(role);
    if (isBuiltinRole(name)) throw new ForbiddenError(`built-in role ${name} cannot be changed`);
    refuseGitOpsManaged(role, `role "${name}"`, 'changed');
    if (changes.name !== undefined && changes.name !== name) {
      throw new BadRequestError('roles cannot be renamed: create a new role and move the assignments');
    }
    const spec: RoleChanges = {};
    if (changes.description !== undefined) spec.description = changes.description;
    for (const field of RULE_FIELDS) if (changes[field] !== undefined) spec[field] = changes[field];
    return this.patch(role, { spec });
  }

  /** Deletes a role and every assignment of it (users and API keys). Built-in roles: 403. */
  async delete(role: RoleResource): Promise<void> {
    const name = roleName(role);
    if (isBuiltinRole(name)) throw new ForbiddenError(`built-in role ${name} cannot be deleted`);
    refuseGitOpsManaged(role, `role "${name}"`, 'deleted');
    await this.remove(role);
    await this.holders.users.dropRole(name);
    await this.holders.apiKeys.dropRole(name);
  }

  /** Gives the role to the user named `username` (404 when there is none); `added`: it was new. */
  async assign(role: RoleResource, username: string): Promise<{ roleId: number; subject: string; added: boolean }> {
    const { user, added } = await this.holders.users.assignRole(username, roleName(role));
    return { roleId: resourceId(role)!, subject: user.spec.username, added };
  }

  /**
   * Gives the role to every member of an identity provider's group (Kite's subjectType "group"):
   * `subject` is a scoped group subject, or a bare name resolved against `sources` (the providers
   * configured now: group-subjects.ts; 400 when malformed or ambiguous). `added` is false when the
   * group already held it; `subject` in the answer is what was stored.
   */
  async assignGroup(
    role: RoleResource,
    subject: string,
    sources: readonly string[],
  ): Promise<{ roleId: number; subject: string; added: boolean }> {
    const group = resolveGroupSubject(subject, sources);
    refuseGitOpsManaged(role, `role "${roleName(role)}"`, 'changed');
    let added = false;
    await this.swap(role, (live) => {
      const groups = roleGroups(live);
      added = !groups.includes(group);
      return added
        ? { metadata: { annotations: { [GROUPS_ANNOTATION]: JSON.stringify([...groups, group]) } } }
        : undefined;
    });
    return { roleId: resourceId(role)!, subject: group, added };
  }

  /**
   * Takes the role from a group: the subject as given, and a bare name's scoped form when one
   * source is configured (what assignGroup stored for it). Nothing when the group did not hold it.
   */
  async unassignGroup(role: RoleResource, subject: string, sources: readonly string[]): Promise<void> {
    const gone = new Set([subject]);
    if (isBareGroupSubject(subject) && sources.length === 1) gone.add(groupSubject(sources[0], subject));
    refuseGitOpsManaged(role, `role "${roleName(role)}"`, 'changed');
    await this.swap(role, (live) => {
      const groups = roleGroups(live);
      if (!groups.some((g) => gone.has(g))) return undefined;
      return { metadata: { annotations: { [GROUPS_ANNOTATION]: JSON.stringify(groups.filter((g) => !gone.has(g))) } } };
    });
  }

  /**
   * The migration of group assignments written before groups were scoped by their provider: with
   * exactly one source configured (`sources`), every bare name becomes that source's subject; with
   * none or several, a bare name is left as it is (it then matches no one: it could be any
   * source's) and logged, for an administrator to scope. Any replica, at start; idempotent.
   */
  async scopeBareGroups(sources: readonly string[]): Promise<void> {
    for (const role of this.list()) {
      const bare = roleGroups(role).filter(isBareGroupSubject);
      if (bare.length === 0) continue;
      if (sources.length !== 1) {
        this.log.warn(
          { role: roleName(role), groups: bare.map((g) => g.slice(0, 100)) },
          'group assignments without a provider grant nothing while several (or no) identity providers are ' +
            'configured: assign oidc:<provider>/<group> or ldap/<group> instead',
        );
        continue;
      }
      try {
        await this.swap(role, (live) => {
          const groups = roleGroups(live);
          if (!groups.some(isBareGroupSubject)) return undefined;
          const scoped = groups.map((g) => (isBareGroupSubject(g) ? groupSubject(sources[0], g) : g));
          return { metadata: { annotations: { [GROUPS_ANNOTATION]: JSON.stringify([...new Set(scoped)]) } } };
        });
        this.log.info({ role: roleName(role), source: sources[0] }, "scoped the role's group assignments");
      } catch (err) {
        this.log.warn({ role: roleName(role), err: describeApiError(err) }, 'could not scope group assignments');
      }
    }
  }

  /** The names of the roles assigned to any of these group subjects (cache-only; exact match). */
  namesForGroups(groups: readonly string[]): string[] {
    if (groups.length === 0) return [];
    const wanted = new Set(groups);
    const names: string[] = [];
    for (const role of this.list()) if (roleGroups(role).some((g) => wanted.has(g))) names.push(roleName(role));
    return names;
  }

  /** Takes the role from the user named `username` (admin from the last enabled admin: 409). */
  async unassign(role: RoleResource, username: string): Promise<void> {
    await this.holders.users.unassignRole(username, roleName(role));
  }
}
