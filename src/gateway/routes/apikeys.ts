// API key administration (CONTRACT section 6): /api/v1/admin/apikeys/ create (the key is shown
// once), list (never a secret), delete (revokes at once). Admin only.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { checkRoleName, parseId } from '../../auth/rules.js';
import { apiKeyView } from '../../auth/views.js';
import { BadRequestError, NotFoundError } from '../../errors.js';
import { resourceId } from '../../host/resources.js';
import { idParams, objectOf, ref, replies } from '../schemas.js';

const PREFIX = '/api/v1/admin/apikeys';
const tags = ['apikeys'];
const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;
const KEY_NAME = /^[A-Za-z0-9._@-]{1,63}$/;

interface CreateBody {
  name: string;
  roles?: string[];
  expiresAt?: string | null;
}

export default async function apiKeyRoutes(app: FastifyInstance) {
  const { auth } = app.services;

  const listRoute = {
    onRequest: app.requireAdmin,
    schema: { tags, summary: 'List API keys (never a secret)', response: replies({ 200: objectOf({ apiKeys: { type: 'array', items: ref('APIKey') } }) }) },
  };
  const list = async () => ({
    apiKeys: [...auth.apiKeys.list()].sort((a, b) => resourceId(a)! - resourceId(b)!).map(apiKeyView),
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
    if (!KEY_NAME.test(name)) throw new BadRequestError("name must be 1 to 63 characters of letters, digits, '.', '_', '@' and '-'");
    for (const role of roles) {
      checkRoleName(role);
      if (!auth.roles.byName(role)) throw new BadRequestError(`unknown role: ${role}`);
    }
    let expires: string | null = null;
    if (expiresAt !== null) {
      const time = Date.parse(expiresAt);
      if (!ISO_DATE_TIME.test(expiresAt) || Number.isNaN(time)) throw new BadRequestError('expiresAt must be an ISO 8601 date-time, e.g. 2030-01-01T00:00:00Z');
      if (time <= Date.now()) throw new BadRequestError('expiresAt must be in the future');
      expires = new Date(time).toISOString().replace(/\.000Z$/, 'Z');
    }
    const { resource, key } = await auth.apiKeys.create({
      name,
      roles: [...new Set(roles)],
      expiresAt: expires,
      createdBy: request.principal!.name,
    });
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
      const key = auth.apiKeys.byId(parseId(request.params.id));
      if (!key) throw new NotFoundError('API key not found');
      await auth.apiKeys.delete(key);
      return { success: true, message: 'API key deleted' };
    },
  );
}
