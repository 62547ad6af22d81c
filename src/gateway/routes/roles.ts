// Role administration (CONTRACT section 6, Kite's shapes): /api/v1/admin/roles/ list, get,
// create, update, delete, and assign/unassign to users. Admin only. The rules (built-in roles
// cannot be changed or deleted: 403; no renames; a deleted role leaves every user and key; the
// last enabled admin keeps admin) are the role store's (host/roles.ts) and the user store's.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { checkPatterns, checkRoleName, parseId } from '../../auth/rules.js';
import { BadRequestError } from '../../errors.js';
import { resourceId, type RoleResource, type RoleSpec } from '../../host/resources.js';
import { idParams, objectOf, ref, replies } from '../schemas.js';
import { roleView } from '../views/identity.js';

const PREFIX = '/api/v1/admin/roles';
const tags = ['roles'];
const roleReply = (...codes: number[]) => replies(Object.fromEntries(codes.map((code) => [code, objectOf({ role: ref('Role') })])));
const assignmentReply = objectOf({ assignment: ref('RoleAssignment') });
const subjectProperties = {
  subjectType: { type: 'string', description: 'only `user` (groups are not supported)' },
  subject: { type: 'string', minLength: 1, maxLength: 256, description: 'the username' },
} as const;
/** Read-only members of the Role JSON: accepted and ignored, so a client can send back what it fetched. */
const readOnlyRoleMembers = { id: {}, isSystem: {}, assignments: {}, createdAt: {} };
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
  const { users, roles } = app.services;
  const view = (role: RoleResource) => roleView(role, users.list());
  const roleById = (raw: string) => roles.getById(parseId(raw));

  const listRoute = {
    onRequest: app.requireAdmin,
    schema: { tags, summary: 'List roles', response: replies({ 200: objectOf({ roles: { type: 'array', items: ref('Role') } }) }) },
  };
  const list = async () => ({ roles: [...roles.list()].sort((a, b) => resourceId(a)! - resourceId(b)!).map(view) });
  app.get(`${PREFIX}/`, listRoute, list);
  app.get(PREFIX, listRoute, list);

  const getSchema = { tags, summary: 'Get a role', params: idParams, response: roleReply(200) };
  app.get<{ Params: { id: string } }>(`${PREFIX}/:id`, { onRequest: app.requireAdmin, schema: getSchema }, async (request) => ({
    role: view(roleById(request.params.id)),
  }));

  const createRoute = {
    onRequest: app.requireAdmin,
    schema: {
      tags,
      summary: 'Create a role',
      body: {
        type: 'object',
        required: ['name'],
        additionalProperties: false,
        properties: { name: { type: 'string' }, ...ruleProperties, ...readOnlyRoleMembers },
      },
      response: roleReply(201),
    },
  };
  const create = async (request: FastifyRequest<{ Body: RoleBody & { name: string } }>, reply: FastifyReply) => {
    const body = request.body;
    checkRoleName(body.name);
    checkRules(body);
    const role = await roles.create(body.name, body);
    return reply.code(201).send({ role: view(role) });
  };
  app.post<{ Body: RoleBody & { name: string } }>(`${PREFIX}/`, createRoute, create);
  app.post<{ Body: RoleBody & { name: string } }>(PREFIX, createRoute, create);

  app.put<{ Params: { id: string }; Body: RoleBody }>(
    `${PREFIX}/:id`,
    {
      onRequest: app.requireAdmin,
      schema: {
        tags,
        summary: 'Change a role (built-in roles: 403; renaming: 400)',
        params: idParams,
        body: {
          type: 'object',
          additionalProperties: false,
          properties: { name: { type: 'string' }, ...ruleProperties, ...readOnlyRoleMembers },
        },
        response: roleReply(200),
      },
    },
    async (request) => {
      const role = roleById(request.params.id);
      checkRules(request.body);
      return { role: view(await roles.update(role, request.body)) };
    },
  );

  const deleteSchema = {
    tags,
    summary: 'Delete a role and its assignments (built-in roles: 403)',
    params: idParams,
    response: replies({ 200: ref('Success') }),
  };
  app.delete<{ Params: { id: string } }>(`${PREFIX}/:id`, { onRequest: app.requireAdmin, schema: deleteSchema }, async (request) => {
    await roles.delete(roleById(request.params.id));
    return { success: true };
  });

  app.post<{ Params: { id: string }; Body: AssignBody }>(
    `${PREFIX}/:id/assign`,
    {
      onRequest: app.requireAdmin,
      schema: {
        tags,
        summary: 'Give the role to a user (201; 200 when the user already has it)',
        params: idParams,
        body: { type: 'object', required: ['subjectType', 'subject'], additionalProperties: false, properties: subjectProperties },
        response: replies({ 200: assignmentReply, 201: assignmentReply }),
      },
    },
    async (request, reply) => {
      const role = roleById(request.params.id);
      checkSubjectType(request.body.subjectType);
      const { roleId, subject, added } = await roles.assign(role, request.body.subject);
      return reply.code(added ? 201 : 200).send({ assignment: { roleId, subjectType: 'user', subject } });
    },
  );

  app.delete<{ Params: { id: string }; Querystring: AssignBody }>(
    `${PREFIX}/:id/assign`,
    {
      onRequest: app.requireAdmin,
      schema: {
        tags,
        summary: 'Take the role from a user (not admin from the last enabled admin: 409)',
        params: idParams,
        querystring: { type: 'object', required: ['subjectType', 'subject'], properties: subjectProperties },
        response: replies({ 200: ref('Success') }),
      },
    },
    async (request) => {
      const role = roleById(request.params.id);
      checkSubjectType(request.query.subjectType);
      await roles.unassign(role, request.query.subject);
      return { success: true };
    },
  );
}
