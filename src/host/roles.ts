// Roles in the host cluster: Role custom resources named objectNameFor('role', name), so an atomic
// create decides name uniqueness. Built-in `admin` (everything) and `viewer` (get, list, watch on
// everything but Secrets, like Kubernetes' own `view` role) are created at start when missing,
// restored (or upgraded from an older release's rules) when they differ, and cannot be changed or
// deleted through the API.
import { ConflictError, ForbiddenError, NotFoundError } from '../errors.js';
import type { Logger } from '../log.js';
import { CacheIndex } from './cache-index.js';
import { hasVersion, isGone } from './cache-sync.js';
import { CustomResources } from './crud.js';
import type { IdAllocator } from './ids.js';
import { apiStatus, describeApiError } from './host-errors.js';
import { objectNameFor } from './names.js';
import { ID_LABEL, MANAGED_BY, MANAGED_BY_LABEL, type RoleResource, type RoleSpec } from './resources.js';
import type { HostStore } from './store.js';

export const BUILTIN_LABEL = 'kiteline.io/builtin';
export const ADMIN_ROLE = 'admin';
export const VIEWER_ROLE = 'viewer';

export type RoleRulesInput = Required<Pick<RoleSpec, 'clusters' | 'namespaces' | 'resources' | 'verbs'>>;

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

export function isBuiltinRole(name: string): boolean {
  return Object.hasOwn(BUILTIN_ROLES, name);
}

const sameList = (a: string[] | undefined, b: string[]) => (a ?? []).length === b.length && b.every((x, i) => a![i] === x);

export class RoleStore {
  readonly index: CacheIndex<RoleResource>;
  readonly crs: CustomResources<RoleResource>;

  constructor(
    private readonly host: HostStore,
    private readonly ids: IdAllocator,
    private readonly log: Logger,
  ) {
    this.index = new CacheIndex(host.roles, roleName);
    this.crs = new CustomResources<RoleResource>(host.customObjects, host.namespace, 'roles', 'Role');
    host.roles.on('delete', (role) => {
      if (isBuiltinRole(roleName(role))) void this.ensureBuiltins().catch(() => undefined);
    });
  }

  byId(id: number): RoleResource | undefined {
    return this.index.byId(id);
  }

  byName(name: string): RoleResource | undefined {
    return this.index.byKey(name);
  }

  list(): readonly RoleResource[] {
    return this.index.all();
  }

  /** Creates missing built-in roles and restores edited ones (any replica; conflicts are fine). */
  async ensureBuiltins(): Promise<void> {
    for (const [name, rules] of Object.entries(BUILTIN_ROLES)) {
      const existing = this.byName(name);
      try {
        if (!existing) {
          await this.create(name, rules, true);
        } else if (!(['clusters', 'namespaces', 'resources', 'verbs'] as const).every((f) => sameList(existing.spec?.[f], rules[f]))) {
          await this.crs.patch(existing.metadata.name, { spec: { ...rules } });
          this.log.warn({ role: name }, 'restored the rules of a built-in role');
        }
      } catch (err) {
        if (!(err instanceof ConflictError)) this.log.warn({ role: name, err: describeApiError(err) }, 'could not ensure built-in role');
      }
    }
  }

  async create(name: string, spec: Partial<RoleSpec>, builtin = false): Promise<RoleResource> {
    if (this.byName(name)) throw alreadyExists(name);
    const id = await this.ids.next('roles', this.index.maxId());
    const objectName = objectNameFor('role', name);
    const labels: Record<string, string> = { [ID_LABEL]: String(id), [MANAGED_BY_LABEL]: MANAGED_BY };
    if (builtin) labels[BUILTIN_LABEL] = 'true';
    let created: RoleResource;
    try {
      created = await this.crs.create({
        metadata: { name: objectName, labels },
        spec: {
          name,
          ...(spec.description ? { description: spec.description } : {}),
          clusters: spec.clusters ?? [],
          namespaces: spec.namespaces ?? [],
          resources: spec.resources ?? [],
          verbs: spec.verbs ?? [],
        },
      });
    } catch (err) {
      if (apiStatus(err) === 409) throw alreadyExists(name);
      throw err;
    }
    await this.host.roles.waitFor(objectName, hasVersion(created));
    return created;
  }

  async update(role: RoleResource, changes: Partial<RoleSpec>): Promise<RoleResource> {
    const name = roleName(role);
    if (isBuiltinRole(name)) throw new ForbiddenError(`built-in role ${name} cannot be changed`);
    let written: RoleResource;
    try {
      written = await this.crs.patch(role.metadata.name, { spec: changes });
    } catch (err) {
      if (apiStatus(err) === 404) throw new NotFoundError(`role not found: ${name}`);
      throw err;
    }
    await this.host.roles.waitFor(written.metadata.name, hasVersion(written));
    return written;
  }

  async delete(role: RoleResource): Promise<void> {
    const name = roleName(role);
    if (isBuiltinRole(name)) throw new ForbiddenError(`built-in role ${name} cannot be deleted`);
    try {
      await this.crs.delete(role.metadata.name, role.metadata.uid);
    } catch (err) {
      if (apiStatus(err) === 404) throw new NotFoundError(`role not found: ${name}`);
      if (apiStatus(err) === 409) throw new ConflictError('the role changed meanwhile; try again');
      throw err;
    }
    await this.host.roles.waitFor(role.metadata.name, isGone(role.metadata.uid));
  }
}

function alreadyExists(name: string): ConflictError {
  return new ConflictError(`role already exists: ${name}`, 'AlreadyExists');
}
