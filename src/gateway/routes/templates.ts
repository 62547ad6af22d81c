// Resource templates (Kite's "create resource" dialog and its settings page): any signed-in user
// lists and reads them at /api/v1/templates/, admins create, update and delete them at
// /api/v1/admin/templates/. Stored as Template custom resources in the install namespace
// (src/host/templates.ts). Template JSON: {id, ID, name, description, yaml, createdAt, updatedAt};
// the name cannot change after creation, as in Kite's UI. docs/tools.md, "Templates and sidebar
// preferences".
import { Type } from 'typebox';
import { parseAllDocuments } from 'yaml';
import { parseId } from '../input-rules.js';
import { BadRequestError } from '../../errors.js';
import { templateView } from '../../host/templates.js';
import { bothSlashes, idParams, objectOf, schemaOf, type App } from '../schemas.js';

const READ_PREFIX = '/api/v1/templates';
const ADMIN_PREFIX = '/api/v1/admin/templates';
const schema = schemaOf('templates');
const string = Type.String();
const integer = Type.Integer();

/** Template YAML at most (far below the API server's object limit). */
export const MAX_TEMPLATE_YAML = 512 * 1024;

const Template = objectOf(
  {
    id: integer,
    ID: Type.Integer({ description: 'the id again: Kite’s UI reads it under this name' }),
    name: string,
    description: string,
    yaml: Type.String({ description: 'one or more YAML documents, for POST /api/v1/resources/apply' }),
    createdAt: string,
    updatedAt: string,
  },
  'A resource template',
);

const NAME_PATTERN = '^[^\\s\\x00-\\x1f\\x7f](?:[^\\x00-\\x1f\\x7f]*[^\\s\\x00-\\x1f\\x7f])?$';
const templateName = (description: string) =>
  Type.String({ minLength: 1, maxLength: 255, pattern: NAME_PATTERN, description });
const description = Type.String({ maxLength: 1024 });
const yaml = Type.String({ minLength: 1, maxLength: MAX_TEMPLATE_YAML, description: 'YAML text (checked for syntax)' });

const NewTemplateBody = Type.Object(
  { name: templateName('unique; no leading or trailing space'), description: Type.Optional(description), yaml },
  { additionalProperties: false },
);
const TemplateChangeBody = Type.Object(
  {
    name: Type.Optional(templateName('the template’s own name (it cannot change)')),
    description: Type.Optional(description),
    yaml: Type.Optional(yaml),
  },
  { additionalProperties: false },
);

/** 400 unless the text parses as YAML and holds something. */
function checkYaml(text: string): void {
  const documents = parseAllDocuments(text);
  for (const [i, doc] of (Array.isArray(documents) ? documents : []).entries()) {
    const problem = doc.errors[0];
    if (problem)
      throw new BadRequestError(`yaml: document ${i + 1} is not valid YAML: ${problem.message.split('\n')[0]}`);
  }
  if (text.trim() === '') throw new BadRequestError('yaml is empty');
}

export default async function templateRoutes(app: App) {
  const store = app.services.templates;
  const templateById = async (raw: string) => store.byId(parseId(raw));

  const listSchema = schema('List the resource templates', { response: { 200: Type.Array(Template) } });
  bothSlashes(READ_PREFIX, (url) =>
    app.get(url, { onRequest: app.requireUser, schema: listSchema }, async () =>
      (await store.list()).map(templateView),
    ),
  );

  const readSchema = schema('Read one resource template', { params: idParams, response: { 200: Template } });
  app.get(`${READ_PREFIX}/:id`, { onRequest: app.requireUser, schema: readSchema }, async (request) =>
    templateView(await templateById(request.params.id)),
  );

  const createSchema = schema('Create a resource template', { body: NewTemplateBody, response: { 201: Template } });
  bothSlashes(ADMIN_PREFIX, (url) =>
    app.post(url, { schema: createSchema }, async (request, reply) => {
      const { name, description, yaml } = request.body;
      checkYaml(yaml);
      const created = await store.create({ name, ...(description ? { description } : {}), yaml });
      reply.code(201);
      return templateView(created);
    }),
  );

  const changeSchema = schema('Change a resource template’s description or YAML (the name cannot change)', {
    params: idParams,
    body: TemplateChangeBody,
    response: { 200: Template },
  });
  app.put(`${ADMIN_PREFIX}/:id`, { schema: changeSchema }, async (request) => {
    const template = await templateById(request.params.id);
    const { name, description, yaml } = request.body;
    if (name !== undefined && name !== template.spec.name)
      throw new BadRequestError("a template's name cannot change: create a new template");
    if (yaml !== undefined) checkYaml(yaml);
    return templateView(
      await store.update(template, {
        ...(description !== undefined ? { description } : {}),
        ...(yaml !== undefined ? { yaml } : {}),
      }),
    );
  });

  const deleteSchema = schema('Delete a resource template', {
    params: idParams,
    response: { 200: objectOf({ message: string }) },
  });
  app.delete(`${ADMIN_PREFIX}/:id`, { schema: deleteSchema }, async (request) => {
    await store.delete(await templateById(request.params.id));
    return { message: 'template deleted' };
  });
}
