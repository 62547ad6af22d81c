// OAuth (OpenID Connect) provider administration, Kite's shapes: /api/v1/admin/oauth-providers/
// list, get, create, update, delete. Admin only. The client secret is write-only: it goes to the
// provider's Secret and every answer shows "***" (or "" when none is stored). The rules (names,
// issuer URLs, no renames) are the store's (host/oauth-providers.ts).
import type { FastifyReply } from 'fastify';
import { Type, type Static } from 'typebox';
import { parseId } from '../input-rules.js';
import { resourceId } from '../../host/resources.js';
import { bothSlashes, idParams, objectOf, ref, replies, type App } from '../schemas.js';
import { oauthProviderView } from '../views/identity.js';

const PREFIX = '/api/v1/admin/oauth-providers';
const tags = ['auth'];
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

  const listRoute = {
    schema: {
      tags,
      summary: 'List the OAuth (OpenID Connect) providers (client secrets shown as "***")',
      response: replies({ 200: objectOf({ providers: Type.Array(ref('OAuthProvider')) }) }),
    },
  };
  const list = async () => ({
    providers: [...oauthProviders.list()].sort((a, b) => resourceId(a)! - resourceId(b)!).map(view),
  });
  bothSlashes(PREFIX, (url) => app.get(url, listRoute, list));

  const getSchema = {
    tags,
    summary: 'Get an OAuth provider',
    params: idParams,
    response: replies({ 200: ProviderReply }),
  };
  app.get(`${PREFIX}/:id`, { schema: getSchema }, async (request) => ({
    provider: view(byId(request.params.id)),
  }));

  const createRoute = {
    schema: {
      tags,
      summary: 'Add an OAuth (OpenID Connect) provider',
      description:
        '`issuer` is required (its configuration is discovered); `authUrl`, `tokenUrl` and `userInfoUrl` are ' +
        "stored for Kite's UI only. The client secret goes to a Secret and is never shown again.",
      body: NewProviderBody,
      response: replies({ 201: ProviderReply }),
    },
  };
  const create = async (request: { body: Static<typeof NewProviderBody> }, reply: FastifyReply) => {
    const provider = await oauthProviders.create(withoutReadOnly(request.body));
    reply.code(201);
    return { provider: view(provider) };
  };
  bothSlashes(PREFIX, (url) => app.post(url, createRoute, create));

  app.put(
    `${PREFIX}/:id`,
    {
      schema: {
        tags,
        summary: 'Change an OAuth provider (renaming: 400; a new clientSecret replaces the stored one)',
        params: idParams,
        body: ProviderChangeBody,
        response: replies({ 200: ProviderReply }),
      },
    },
    async (request) => {
      const provider = byId(request.params.id);
      return { provider: view(await oauthProviders.update(provider, withoutReadOnly(request.body))) };
    },
  );

  app.delete(
    `${PREFIX}/:id`,
    {
      schema: {
        tags,
        summary: 'Delete an OAuth provider and its client secret (its users stay, and cannot sign in through it)',
        params: idParams,
        response: replies({ 200: objectOf({ success: Type.Boolean(), message: Type.String() }) }),
      },
    },
    async (request) => {
      await oauthProviders.delete(byId(request.params.id));
      return { success: true, message: 'OAuth provider deleted successfully' };
    },
  );
}
