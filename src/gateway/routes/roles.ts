// Role administration (docs/auth.md, "Roles and authorization"; Kite's shapes): /api/v1/admin/roles/ list, get,
// create, update, delete, and assign/unassign to users. Admin only. The rules (built-in roles
// cannot be changed or deleted: 403; no renames; a deleted role leaves every user and key; the
// last enabled admin keeps admin) are the role store's (host/roles.ts) and the user store's.
import { Type, type Static } from 'typebox';
import { checkPatterns, checkRoleName, parseId } from '../input-rules.js';
import { BadRequestError } from '../../errors.js';
import { resourceId, type RoleResource } from '../../host/resources.js';
import { bothSlashes, idParams, objectOf, ref, schemaOf, type App } from '../schemas.js';
import { roleView } from '../views/identity.js';

const PREFIX = '/api/v1/admin/roles';
const schema = schemaOf('roles');
const RoleReply = objectOf({ role: ref('Role') });
const AssignmentReply = objectOf({ assignment: ref('RoleAssignment') });
const subjectProperties = {
  subjectType: Type.String({ description: "`user`, or `group` (an identity provider's group)" }),
  subject: Type.String({
    minLength: 1,
    maxLength: 1024,
    description:
      'the username, or the group as `oidc:<provider>/<group>` or `ldap/<group>` (a bare group name is taken as ' +
      "the only identity provider's when exactly one is configured, else 400)",
  }),
};
/** Read-only members of the Role JSON: accepted and ignored, so a client can send back what it fetched. */
const readOnlyRoleMembers = {
  id: Type.Optional(Type.Unknown()),
  isSystem: Type.Optional(Type.Unknown()),
  assignments: Type.Optional(Type.Unknown()),
  createdAt: Type.Optional(Type.Unknown()),
};
const patternList = () => Type.Optional(Type.Array(Type.String(), { maxItems: 256 }));
const ruleProperties = {
  description: Type.Optional(Type.String({ maxLength: 1024 })),
  clusters: patternList(),
  namespaces: patternList(),
  resources: patternList(),
  verbs: patternList(),
};
const RULE_FIELDS = ['clusters', 'namespaces', 'resources', 'verbs'] as const;

const NewRoleBody = Type.Object(
  { name: Type.String(), ...ruleProperties, ...readOnlyRoleMembers },
  { additionalProperties: false },
);
const RoleChangeBody = Type.Object(
  { name: Type.Optional(Type.String()), ...ruleProperties, ...readOnlyRoleMembers },
  { additionalProperties: false },
);
const AssignBody = Type.Object(subjectProperties, { additionalProperties: false });
const AssignQuery = Type.Object(subjectProperties);

function checkRules(body: Static<typeof RoleChangeBody>): void {
  for (const field of RULE_FIELDS) if (body[field]) checkPatterns(field, body[field]);
}

function checkSubjectType(subjectType: string): 'user' | 'group' {
  if (subjectType !== 'user' && subjectType !== 'group')
    throw new BadRequestError('subjectType must be "user" or "group"');
  return subjectType;
}

export default async function roleRoutes(app: App) {
  const { users, roles, auth } = app.services;
  const view = (role: RoleResource) => roleView(role, users.list());
  const roleById = (raw: string) => roles.getById(parseId(raw));

  const listSchema = schema('List roles', { response: { 200: objectOf({ roles: Type.Array(ref('Role')) }) } });
  bothSlashes(PREFIX, (url) =>
    app.get(url, { schema: listSchema }, async () => ({
      roles: [...roles.list()].sort((a, b) => resourceId(a)! - resourceId(b)!).map(view),
    })),
  );

  const getSchema = schema('Get a role', { params: idParams, response: { 200: RoleReply } });
  app.get(`${PREFIX}/:id`, { schema: getSchema }, async (request) => ({
    role: view(roleById(request.params.id)),
  }));

  const createSchema = schema('Create a role', { body: NewRoleBody, response: { 201: RoleReply } });
  bothSlashes(PREFIX, (url) =>
    app.post(url, { schema: createSchema }, async (request, reply) => {
      const body = request.body;
      checkRoleName(body.name);
      checkRules(body);
      const role = await roles.create(body.name, body);
      reply.code(201);
      return { role: view(role) };
    }),
  );

  const changeSchema = schema('Change a role (built-in roles: 403; renaming: 400)', {
    params: idParams,
    body: RoleChangeBody,
    response: { 200: RoleReply },
  });
  app.put(`${PREFIX}/:id`, { schema: changeSchema }, async (request) => {
    const role = roleById(request.params.id);
    checkRules(request.body);
    return { role: view(await roles.update(role, request.body)) };
  });

  const deleteSchema = schema('Delete a role and its assignments (built-in roles: 403)', {
    params: idParams,
    response: { 200: ref('Success') },
  });
  app.delete(`${PREFIX}/:id`, { schema: deleteSchema }, async (request) => {
    await roles.delete(roleById(request.params.id));
    return { success: true };
  });

  const assignSchema = schema(
    "Give the role to a user, or to an identity provider's group (201; 200 when already given)",
    { params: idParams, body: AssignBody, response: { 200: AssignmentReply, 201: AssignmentReply } },
  );
  app.post(`${PREFIX}/:id/assign`, { schema: assignSchema }, async (request, reply) => {
    const role = roleById(request.params.id);
    const subjectType = checkSubjectType(request.body.subjectType);
    const { roleId, subject, added } =
      subjectType === 'group'
        ? await roles.assignGroup(role, request.body.subject, auth.groupSources())
        : await roles.assign(role, request.body.subject);
    reply.code(added ? 201 : 200);
    return { assignment: { roleId, subjectType, subject } };
  });

  const unassignSchema = schema('Take the role from a user or a group (not admin from the last enabled admin: 409)', {
    params: idParams,
    querystring: AssignQuery,
    response: { 200: ref('Success') },
  });
  app.delete(`${PREFIX}/:id/assign`, { schema: unassignSchema }, async (request) => {
    const role = roleById(request.params.id);
    if (checkSubjectType(request.query.subjectType) === 'group')
      await roles.unassignGroup(role, request.query.subject, auth.groupSources());
    else await roles.unassign(role, request.query.subject);
    return { success: true };
  });
}
