// Role administration (CONTRACT section 6, Kite's shapes): /api/v1/admin/roles/ list, get,
// create, update, delete, and assign/unassign to users. Admin only. Built-in roles (admin,
// viewer) cannot be changed or deleted (403).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { checkPatterns, checkRoleName, parseId } from '../../auth/rules.js';
import { roleView } from '../../auth/views.js';
import { BadRequestError, ConflictError, NotFoundError } from '../../errors.js';
import { resourceId, type RoleResource, type RoleSpec } from '../../host/resources.js';
import { ADMIN_ROLE, roleName } from '../../host/roles.js';

const PREFIX = '/api/v1/admin/roles';
const idParams = { type: 'object', required: ['id'], properties: { id: { type: 'string' } } } as const;
const patternList = { type: 'array', maxItems: 256, items: { type: 'string' } } as const;
const ruleProperties = {
  description: { type: 'string', maxLength: 1024 },
  clusters: patternList,
  namespaces: patternList,
  resources: patternList,
  verbs: patternList,
} as const;
const RULE_FIELDS = ['clusters', 'namespaces', 'resources', 'verbs'] as const;

type RoleBody = Partial<Pick<RoleSpec, 'description' | 'clusters' | 'namespaces' | 'resources' | 'verbs'>> & { name?: string };
interface AssignBody {
  subjectType: string;
  subject: string;
}

function checkRules(body: RoleBody): void {
  for (const field of RULE_FIELDS) if (body[field]) checkPatterns(field, body[field]!);
}

function checkSubjectType(subjectType: string): void {
  if (subjectType !== 'user') throw new BadRequestError('subjectType must be "user" (groups are not supported)');
}

export default async function roleRoutes(app: FastifyInstance) {
  const { auth } = app.services;
  const view = (role: RoleResource) => roleView(role, auth.users.list());

  function roleById(raw: string): RoleResource {
    const role = auth.roles.byId(parseId(raw));
    if (!role) throw new NotFoundError('role not found');
    return role;
  }

  const listRoute = { preHandler: app.requireAdmin };
  const list = async () => ({ roles: [...auth.roles.list()].sort((a, b) => resourceId(a)! - resourceId(b)!).map(view) });
  app.get(`${PREFIX}/`, listRoute, list);
  app.get(PREFIX, listRoute, list);

  app.get<{ Params: { id: string } }>(`${PREFIX}/:id`, { preHandler: app.requireAdmin, schema: { params: idParams } }, async (request) => ({
    role: view(roleById(request.params.id)),
  }));

  const createRoute = {
    preHandler: app.requireAdmin,
    schema: {
      body: {
        type: 'object',
        required: ['name'],
        additionalProperties: false,
        properties: { name: { type: 'string' }, ...ruleProperties, id: {}, isSystem: {}, assignments: {}, createdAt: {} },
      },
    },
  };
  const create = async (request: FastifyRequest<{ Body: RoleBody & { name: string } }>, reply: FastifyReply) => {
    const body = request.body;
    checkRoleName(body.name);
    checkRules(body);
    const role = await auth.roles.create(body.name, body);
    return reply.code(201).send({ role: view(role) });
  };
  app.post<{ Body: RoleBody & { name: string } }>(`${PREFIX}/`, createRoute, create);
  app.post<{ Body: RoleBody & { name: string } }>(PREFIX, createRoute, create);

  app.put<{ Params: { id: string }; Body: RoleBody }>(
    `${PREFIX}/:id`,
    {
      preHandler: app.requireAdmin,
      schema: {
        params: idParams,
        // Read-only members of the Role JSON (id, isSystem, assignments, createdAt) are accepted
        // and ignored, so a client can send back what it fetched.
        body: {
          type: 'object',
          additionalProperties: false,
          properties: { name: { type: 'string' }, ...ruleProperties, id: {}, isSystem: {}, assignments: {}, createdAt: {} },
        },
      },
    },
    async (request) => {
      const role = roleById(request.params.id);
      const body = request.body;
      if (body.name !== undefined && body.name !== roleName(role)) {
        throw new BadRequestError('roles cannot be renamed: create a new role and move the assignments');
      }
      checkRules(body);
      const changes: Partial<RoleSpec> = {};
      if (body.description !== undefined) changes.description = body.description;
      for (const field of RULE_FIELDS) if (body[field] !== undefined) changes[field] = body[field];
      return { role: view(await auth.roles.update(role, changes)) };
    },
  );

  app.delete<{ Params: { id: string } }>(`${PREFIX}/:id`, { preHandler: app.requireAdmin, schema: { params: idParams } }, async (request) => {
    const role = roleById(request.params.id);
    const name = roleName(role);
    await auth.roles.delete(role);
    // Assignments die with the role, so a later role of the same name grants nothing by surprise.
    for (const user of auth.users.list()) {
      if ((user.spec.roles ?? []).includes(name)) await auth.users.updateRoles(user, (roles) => roles.filter((r) => r !== name));
    }
    await auth.apiKeys.removeRole(name);
    return { success: true };
  });

  app.post<{ Params: { id: string }; Body: AssignBody }>(
    `${PREFIX}/:id/assign`,
    {
      preHandler: app.requireAdmin,
      schema: {
        params: idParams,
        body: {
          type: 'object',
          required: ['subjectType', 'subject'],
          additionalProperties: false,
          properties: { subjectType: { type: 'string' }, subject: { type: 'string', minLength: 1, maxLength: 256 } },
        },
      },
    },
    async (request, reply) => {
      const role = roleById(request.params.id);
      checkSubjectType(request.body.subjectType);
      const user = auth.users.byUsername(request.body.subject);
      if (!user) throw new NotFoundError(`user not found: ${request.body.subject}`);
      const name = roleName(role);
      const assignment = { roleId: resourceId(role)!, subjectType: 'user' as const, subject: user.spec.username };
      const had = (user.spec.roles ?? []).includes(name);
      await auth.users.updateRoles(user, (roles) => (roles.includes(name) ? roles : [...roles, name]));
      return reply.code(had ? 200 : 201).send({ assignment });
    },
  );

  app.delete<{ Params: { id: string }; Querystring: AssignBody }>(
    `${PREFIX}/:id/assign`,
    {
      preHandler: app.requireAdmin,
      schema: {
        params: idParams,
        querystring: {
          type: 'object',
          required: ['subjectType', 'subject'],
          properties: { subjectType: { type: 'string' }, subject: { type: 'string', minLength: 1, maxLength: 256 } },
        },
      },
    },
    async (request) => {
      const role = roleById(request.params.id);
      checkSubjectType(request.query.subjectType);
      const user = auth.users.byUsername(request.query.subject);
      if (!user) throw new NotFoundError(`user not found: ${request.query.subject}`);
      const name = roleName(role);
      if (name === ADMIN_ROLE && user.spec.enabled !== false && (user.spec.roles ?? []).includes(ADMIN_ROLE)) {
        const admins = auth.users.list().filter((u) => u.spec.enabled !== false && (u.spec.roles ?? []).includes(ADMIN_ROLE));
        if (admins.length === 1) throw new ConflictError('cannot remove the admin role from the last enabled admin');
      }
      await auth.users.updateRoles(user, (roles) => roles.filter((r) => r !== name));
      return { success: true };
    },
  );
}
