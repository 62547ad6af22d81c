// API key administration (docs/auth.md): /api/v1/admin/apikeys/ create (the key is shown
// once), list (never a secret), delete (revokes at once). Admin only. The rules (key names, known
// roles, a future expiry, unique names) are the API key store's (host/apikeys.ts).
import { Type } from 'typebox';
import { checkRoleName, parseId } from '../input-rules.js';
import { resourceId } from '../../host/resources.js';
import { bothSlashes, idParams, nullable, objectOf, ref, schemaOf, type App } from '../schemas.js';
import { apiKeyView } from '../views/identity.js';

const PREFIX = '/api/v1/admin/apikeys';
const schema = schemaOf('apikeys');

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

  const listSchema = schema('List API keys (never a secret)', {
    response: { 200: objectOf({ apiKeys: Type.Array(ref('APIKey')) }) },
  });
  bothSlashes(PREFIX, (url) =>
    app.get(url, { schema: listSchema }, async () => ({
      apiKeys: [...apiKeys.list()].sort((a, b) => resourceId(a)! - resourceId(b)!).map(apiKeyView),
    })),
  );

  const createSchema = schema('Create an API key (the key is in the answer, this once)', {
    body: NewAPIKeyBody,
    response: { 201: ref('NewAPIKey') },
  });
  bothSlashes(PREFIX, (url) =>
    app.post(url, { schema: createSchema }, async (request, reply) => {
      const { name, roles = [], expiresAt = null } = request.body;
      for (const role of roles) checkRoleName(role);
      const { resource, key } = await apiKeys.create({ name, roles, expiresAt, createdBy: request.principal!.name });
      const view = apiKeyView(resource);
      reply.code(201);
      const { id, createdAt } = view;
      return { id, name: view.name, roles: view.roles, expiresAt: view.expiresAt, createdAt, key };
    }),
  );

  const deleteSchema = schema('Delete (revoke) an API key', {
    params: idParams,
    response: { 200: objectOf({ success: Type.Boolean(), message: Type.String() }) },
  });
  app.delete(`${PREFIX}/:id`, { schema: deleteSchema }, async (request) => {
    await apiKeys.deleteById(parseId(request.params.id));
    return { success: true, message: 'API key deleted' };
  });
}
