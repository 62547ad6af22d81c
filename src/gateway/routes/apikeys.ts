// API key administration (docs/auth.md): /api/v1/admin/apikeys/ create (the key is shown
// once), list (never a secret), delete (revokes at once). Admin only. The rules (key names, known
// roles, a future expiry, unique names) are the API key store's (host/apikeys.ts).
import type { FastifyReply } from 'fastify';
import { Type, type Static } from 'typebox';
import { checkRoleName, parseId } from '../input-rules.js';
import { resourceId } from '../../host/resources.js';
import { bothSlashes, idParams, nullable, objectOf, ref, replies, type App, type RequestWith } from '../schemas.js';
import { apiKeyView } from '../views/identity.js';

const PREFIX = '/api/v1/admin/apikeys';
const tags = ['apikeys'];

const NewAPIKeyBody = Type.Object(
  {
    name: Type.String({ description: "1 to 63 characters of letters, digits, '.', '_', '@' and '-'" }),
    roles: Type.Optional(Type.Array(Type.String(), { maxItems: 64, description: 'names of existing roles' })),
    expiresAt: Type.Optional(
      nullable(Type.String({ description: 'ISO 8601 date-time in the future; null or absent: never' })),
    ),
  },
  { additionalProperties: false },
);

export default async function apiKeyRoutes(app: App) {
  const { apiKeys } = app.services;

  const listRoute = {
    schema: {
      tags,
      summary: 'List API keys (never a secret)',
      response: replies({ 200: objectOf({ apiKeys: Type.Array(ref('APIKey')) }) }),
    },
  };
  const list = async () => ({
    apiKeys: [...apiKeys.list()].sort((a, b) => resourceId(a)! - resourceId(b)!).map(apiKeyView),
  });
  bothSlashes(PREFIX, (url) => app.get(url, listRoute, list));

  const createRoute = {
    schema: {
      tags,
      summary: 'Create an API key (the key is in the answer, this once)',
      body: NewAPIKeyBody,
      response: replies({ 201: ref('NewAPIKey') }),
    },
  };
  const create = async (request: RequestWith<{ body: Static<typeof NewAPIKeyBody> }>, reply: FastifyReply) => {
    const { name, roles = [], expiresAt = null } = request.body;
    for (const role of roles) checkRoleName(role);
    const { resource, key } = await apiKeys.create({ name, roles, expiresAt, createdBy: request.principal!.name });
    const view = apiKeyView(resource);
    reply.code(201);
    const { id, createdAt } = view;
    return { id, name: view.name, roles: view.roles, expiresAt: view.expiresAt, createdAt, key };
  };
  bothSlashes(PREFIX, (url) => app.post(url, createRoute, create));

  app.delete(
    `${PREFIX}/:id`,
    {
      schema: {
        tags,
        summary: 'Delete (revoke) an API key',
        params: idParams,
        response: replies({ 200: objectOf({ success: Type.Boolean(), message: Type.String() }) }),
      },
    },
    async (request) => {
      await apiKeys.deleteById(parseId(request.params.id));
      return { success: true, message: 'API key deleted' };
    },
  );
}
