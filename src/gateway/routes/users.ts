// User administration (docs/auth.md, "Users"): /api/v1/admin/users/... All routes need
// role admin, except create_super_user (also at Kite's newest /api/auth/setup/create_super_user),
// which is public until the first super user is created (and then closed for good); it answers
// with the new user's session cookie, so Kite's set-up flow goes on signed in (the cluster import
// that follows needs an admin). The rules (the first super user, not yourself, the last enabled
// admin, username uniqueness) are the user store's (host/users.ts); these routes parse, call it
// and shape the answer.
import { Type, type Static } from 'typebox';
import { checkPassword, checkUsername, parseId } from '../input-rules.js';
import { creationTime } from '../../host/cache-index.js';
import { resourceId, type UserResource } from '../../host/resources.js';
import type { NewUser } from '../../host/users.js';
import { wantsSecureCookie } from '../plugins/authenticate.js';
import { bothSlashes, idParams, objectOf, PUBLIC, ref, schemaOf, stringEnum, type App } from '../schemas.js';
import { userView } from '../views/identity.js';

const PREFIX = '/api/v1/admin/users';
/** Kite's newest path of create_super_user. */
const SETUP_SUPER_USER = '/api/auth/setup/create_super_user';
const schema = schemaOf('users');
const integer = Type.Integer();

// NewUserBody and UserChangeBody accept (and ignore) other members, as they always have.
const NewUserBody = Type.Object({
  username: Type.String(),
  password: Type.String(),
  name: Type.Optional(Type.String({ maxLength: 256 })),
});
const SORT_FIELDS = ['id', 'username', 'name', 'createdAt', 'lastLoginAt'] as const;
type SortField = (typeof SORT_FIELDS)[number];
const UserListQuery = Type.Object({
  page: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000000 })),
  size: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
  search: Type.Optional(Type.String({ maxLength: 256 })),
  role: Type.Optional(Type.String({ maxLength: 256 })),
  sortBy: Type.Optional(stringEnum(SORT_FIELDS)),
  sortOrder: Type.Optional(stringEnum(['asc', 'desc'])),
});
const UserChangeBody = Type.Object({
  name: Type.Optional(Type.String({ maxLength: 256 })),
  avatar_url: Type.Optional(Type.String({ maxLength: 2048 })),
});
const PasswordBody = Type.Object({ password: Type.String() }, { additionalProperties: false });
const EnableBody = Type.Object({ enabled: Type.Boolean() }, { additionalProperties: false });

const UserList = objectOf({ users: Type.Array(ref('User')), total: integer, page: integer, size: integer });

function sortKey(user: UserResource, field: SortField): string | number | null {
  switch (field) {
    case 'id':
      return resourceId(user) ?? 0;
    case 'username':
      return user.spec.username;
    case 'name':
      return (user.spec.name ?? '').toLowerCase();
    case 'createdAt':
      return creationTime(user);
    case 'lastLoginAt':
      return user.status?.lastLoginAt ?? null;
  }
}

export default async function userRoutes(app: App) {
  const { auth, users, roles } = app.services;
  const view = (user: UserResource) => userView(user, (name) => roles.byName(name), auth.effectiveRoles(user));
  const userById = (raw: string) => users.getById(parseId(raw));

  /** The caller's user id (the store refuses to delete or disable the caller). */
  const callerUserId = (principal: { kind: string; id: number } | undefined) =>
    principal?.kind === 'user' ? principal.id : undefined;

  /** A new user from the body: the first super user (create_super_user) or one an admin adds. */
  async function createUser(
    body: Static<typeof NewUserBody>,
    create: (user: Omit<NewUser, 'roles'>) => Promise<UserResource>,
  ): Promise<UserResource> {
    const { username, password, name } = body;
    checkUsername(username);
    checkPassword(password);
    return create({ username, password, name: name ?? '' });
  }

  const superUserSchema = schemaOf('setup')('Create the first user, with role admin, and sign in as that user', {
    description:
      'Public until the first super user exists (of two concurrent calls exactly one succeeds); ' +
      'afterwards 403 for good, ' +
      'even if every user is deleted later. Sets the `auth_token` session cookie of the new user, as a login does.',
    security: PUBLIC,
    body: NewUserBody,
    response: { 201: ref('User') },
  });
  // Kite's newest spelling (SETUP_SUPER_USER) is the same route: one lock, one answer.
  for (const url of [`${PREFIX}/create_super_user`, SETUP_SUPER_USER])
    app.post(url, { schema: superUserSchema }, async (request, reply) => {
      const user = await createUser(request.body, (user) => users.createSuperUser(user));
      reply.header('set-cookie', auth.sessionSetCookie(user, wantsSecureCookie(app, request)));
      reply.code(201);
      return view(user);
    });

  const listSchema = schema('List users (paged, searchable, sortable)', {
    querystring: UserListQuery,
    response: { 200: UserList },
  });
  bothSlashes(PREFIX, (url) =>
    app.get(url, { schema: listSchema }, async (request) => {
      const { page = 1, size = 20, search, role, sortBy = 'id', sortOrder = 'desc' } = request.query;
      const needle = search?.toLowerCase();
      let selected = users.list().filter((u) => {
        if (role !== undefined && role !== '' && !(u.spec.roles ?? []).includes(role)) return false;
        if (needle)
          return u.spec.username.toLowerCase().includes(needle) || (u.spec.name ?? '').toLowerCase().includes(needle);
        return true;
      });
      const direction = sortOrder === 'asc' ? 1 : -1;
      selected = [...selected].sort((a, b) => {
        const ka = sortKey(a, sortBy);
        const kb = sortKey(b, sortBy);
        if (ka === null || kb === null) {
          if (ka !== kb) return ka === null ? 1 : -1; // never-logged-in users last, either order
        } else if (ka !== kb) {
          return (ka < kb ? -1 : 1) * direction;
        }
        return ((resourceId(a) ?? 0) - (resourceId(b) ?? 0)) * direction;
      });
      const start = (page - 1) * size;
      return { users: selected.slice(start, start + size).map(view), total: selected.length, page, size };
    }),
  );

  const createSchema = schema('Create a user (no role)', { body: NewUserBody, response: { 201: ref('User') } });
  bothSlashes(PREFIX, (url) =>
    app.post(url, { schema: createSchema }, async (request, reply) => {
      const user = await createUser(request.body, (user) => users.create(user));
      reply.code(201);
      return view(user);
    }),
  );

  const changeSchema = schema("Change a user's name or avatar URL", {
    params: idParams,
    body: UserChangeBody,
    response: { 200: ref('User') },
  });
  app.put(`${PREFIX}/:id`, { schema: changeSchema }, async (request) => {
    const user = userById(request.params.id);
    const { name, avatar_url } = request.body;
    const changes: { name?: string; avatarURL?: string } = {};
    if (name !== undefined) changes.name = name;
    if (avatar_url !== undefined) changes.avatarURL = avatar_url;
    return view(await users.update(user, changes));
  });

  const deleteSchema = schema('Delete a user (not yourself, not the last enabled admin: 409)', {
    params: idParams,
    response: { 200: ref('Success') },
  });
  app.delete(`${PREFIX}/:id`, { schema: deleteSchema }, async (request) => {
    await users.delete(userById(request.params.id), callerUserId(request.principal));
    return { success: true };
  });

  const passwordSchema = schema("Set a user's password (ends the user's sessions)", {
    params: idParams,
    body: PasswordBody,
    response: { 200: ref('User') },
  });
  app.post(`${PREFIX}/:id/reset_password`, { schema: passwordSchema }, async (request) => {
    const user = userById(request.params.id);
    checkPassword(request.body.password);
    return view(await users.setPassword(user, request.body.password));
  });

  const enableSchema = schema(
    'Enable or disable a user (disabling ends the sessions; not yourself, not the last enabled admin: 409)',
    { params: idParams, body: EnableBody, response: { 200: ref('Success') } },
  );
  app.post(`${PREFIX}/:id/enable`, { schema: enableSchema }, async (request) => {
    await users.setEnabled(userById(request.params.id), request.body.enabled, callerUserId(request.principal));
    return { success: true };
  });
}
