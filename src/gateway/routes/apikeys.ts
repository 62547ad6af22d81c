// API key administration (CONTRACT section 6): /api/v1/admin/apikeys/ create (the key is shown
// once), list (never a secret), delete (revokes at once). Admin only. The rules (key names, known
// roles, a future expiry, unique names) are the API key store's (host/apikeys.ts).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { checkRoleName, parseId } from '../../auth/rules.js';
import { resourceId } from '../../host/resources.js';
import { idParams, objectOf, ref, replies } from '../schemas.js';
import { apiKeyView } from '../views/identity.js';

const PREFIX = '/api/v1/admin/apikeys';
const tags = ['apikeys'];

interface CreateBody {
  name: string;
  roles?: string[];
  expiresAt?: string | null;
}

export default async function apiKeyRoutes(app: FastifyInstance) {
  const { apiKeys } = app.services;

  const listRoute = {
    onRequest: app.requireAdmin,
    schema: { tags, summary: 'List API keys (never a secret)', response: replies({ 200: objectOf({ apiKeys: { type: 'array', items: ref('APIKey') } }) }) },
  };
  const list = async () => ({
    apiKeys: [...apiKeys.list()].sort((a, b) => resourceId(a)! - resourceId(b)!).map(apiKeyView),
  });
  app.get(`${PREFIX}/`, listRoute, list);
  app.get(PREFIX, listRoute, list);

  const createRoute = {
    onRequest: app.requireAdmin,
    schema: {
      tags,
      summary: 'Create an API key (the key is in the answer, this once)',
      body: {
        type: 'object',
        required: ['name'],
        additionalProperties: false,
        properties: {
          name: { type: 'string', description: "1 to 63 characters of letters, digits, '.', '_', '@' and '-'" },
          roles: { type: 'array', maxItems: 64, items: { type: 'string' }, description: 'names of existing roles' },
          expiresAt: { type: ['string', 'null'], description: 'ISO 8601 date-time in the future; null or absent: never' },
        },
      },
      response: replies({ 201: ref('NewAPIKey') }),
    },
  };
  const create = async (request: FastifyRequest<{ Body: CreateBody }>, reply: FastifyReply) => {
    const { name, roles = [], expiresAt = null } = request.body;
    for (const role of roles) checkRoleName(role);
    const { resource, key } = await apiKeys.create({ name, roles, expiresAt, createdBy: request.principal!.name });
    const view = apiKeyView(resource);
    return reply.code(201).send({ id: view.id, name: view.name, roles: view.roles, expiresAt: view.expiresAt, createdAt: view.createdAt, key });
  };
  app.post<{ Body: CreateBody }>(`${PREFIX}/`, createRoute, create);
  app.post<{ Body: CreateBody }>(PREFIX, createRoute, create);

  app.delete<{ Params: { id: string } }>(
    `${PREFIX}/:id`,
    {
      onRequest: app.requireAdmin,
      schema: {
        tags,
        summary: 'Delete (revoke) an API key',
        params: idParams,
        response: replies({ 200: objectOf({ success: { type: 'boolean' }, message: { type: 'string' } }) }),
      },
    },
    async (request) => {
      await apiKeys.deleteById(parseId(request.params.id));
      return { success: true, message: 'API key deleted' };
    },
  );
}
