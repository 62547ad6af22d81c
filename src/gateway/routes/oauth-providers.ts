// OAuth (OpenID Connect) provider administration, Kite's shapes: /api/v1/admin/oauth-providers/
// list, get, create, update, delete. Admin only. The client secret is write-only: it goes to the
// provider's Secret and every answer shows "***" (or "" when none is stored). The rules (names,
// issuer URLs, no renames) are the store's (host/oauth-providers.ts).
import { Type } from 'typebox';
import { parseId } from '../input-rules.js';
import { resourceId } from '../../host/resources.js';
import { bothSlashes, idParams, objectOf, ref, schemaOf, type App } from '../schemas.js';
import { oauthProviderView } from '../views/identity.js';

const PREFIX = '/api/v1/admin/oauth-providers';
const schema = schemaOf('auth');
const ProviderReply = objectOf({ provider: ref('OAuthProvider') });

const url = () => Type.Optional(Type.String({ maxLength: 2048 }));
const providerProperties = {
  clientId: Type.Optional(Type.String({ maxLength: 1024 })),
  clientSecret: Type.Optional(
    Type.String({ maxLength: 4096, description: 'write-only; absent, "" or "***" keeps the stored one' }),
  ),
  issuer: url(),
  authUrl: url(),
  tokenUrl: url(),
  userInfoUrl: url(),
  scopes: Type.Optional(Type.String({ maxLength: 1024, description: 'comma- or space-separated' })),
  usernameClaim: Type.Optional(Type.String({ maxLength: 256, description: 'default preferred_username, then email' })),
  groupsClaim: Type.Optional(Type.String({ maxLength: 256, description: 'default groups' })),
  allowedGroups: Type.Optional(
    Type.String({ maxLength: 4096, description: 'comma-separated: only their members sign in; "" for anyone' }),
  ),
  enabled: Type.Optional(Type.Boolean()),
};
/** Read-only members of the provider JSON: accepted and ignored, so a client can send back what it fetched. */
const readOnlyMembers = {
  id: Type.Optional(Type.Unknown()),
  ID: Type.Optional(Type.Unknown()),
  createdAt: Type.Optional(Type.Unknown()),
  updatedAt: Type.Optional(Type.Unknown()),
  CreatedAt: Type.Optional(Type.Unknown()),
  UpdatedAt: Type.Optional(Type.Unknown()),
};
const NewProviderBody = Type.Object(
  { name: Type.String({ maxLength: 256 }), ...providerProperties, ...readOnlyMembers },
  { additionalProperties: false },
);
const ProviderChangeBody = Type.Object(
  { name: Type.Optional(Type.String({ maxLength: 256 })), ...providerProperties, ...readOnlyMembers },
  { additionalProperties: false },
);

function withoutReadOnly<T extends Record<string, unknown>>(body: T): T {
  const copy = { ...body };
  for (const key of Object.keys(readOnlyMembers)) delete copy[key];
  return copy;
}

export default async function oauthProviderRoutes(app: App) {
  const { oauthProviders } = app.services;
  const view = oauthProviderView;
  const byId = (raw: string) => oauthProviders.getById(parseId(raw));

  const listSchema = schema('List the OAuth (OpenID Connect) providers (client secrets shown as "***")', {
    response: { 200: objectOf({ providers: Type.Array(ref('OAuthProvider')) }) },
  });
  bothSlashes(PREFIX, (url) =>
    app.get(url, { schema: listSchema }, async () => ({
      providers: [...oauthProviders.list()].sort((a, b) => resourceId(a)! - resourceId(b)!).map(view),
    })),
  );

  const getSchema = schema('Get an OAuth provider', { params: idParams, response: { 200: ProviderReply } });
  app.get(`${PREFIX}/:id`, { schema: getSchema }, async (request) => ({
    provider: view(byId(request.params.id)),
  }));

  const createSchema = schema('Add an OAuth (OpenID Connect) provider', {
    description:
      '`issuer` is required (its configuration is discovered); `authUrl`, `tokenUrl` and `userInfoUrl` are ' +
      "stored for Kite's UI only. The client secret goes to a Secret and is never shown again.",
    body: NewProviderBody,
    response: { 201: ProviderReply },
  });
  bothSlashes(PREFIX, (url) =>
    app.post(url, { schema: createSchema }, async (request, reply) => {
      const provider = await oauthProviders.create(withoutReadOnly(request.body));
      reply.code(201);
      return { provider: view(provider) };
    }),
  );

  const changeSchema = schema('Change an OAuth provider (renaming: 400; a new clientSecret replaces the stored one)', {
    params: idParams,
    body: ProviderChangeBody,
    response: { 200: ProviderReply },
  });
  app.put(`${PREFIX}/:id`, { schema: changeSchema }, async (request) => {
    const provider = byId(request.params.id);
    return { provider: view(await oauthProviders.update(provider, withoutReadOnly(request.body))) };
  });

  const deleteSchema = schema(
    'Delete an OAuth provider and its client secret (its users stay, and cannot sign in through it)',
    { params: idParams, response: { 200: objectOf({ success: Type.Boolean(), message: Type.String() }) } },
  );
  app.delete(`${PREFIX}/:id`, { schema: deleteSchema }, async (request) => {
    await oauthProviders.delete(byId(request.params.id));
    return { success: true, message: 'OAuth provider deleted successfully' };
  });
}
