// Route schemas compiled at first use or after listen (src/gateway/lazy-schemas.ts): the answers are
// Fastify's own (validation messages, serialization dropping unlisted members), and a schema that
// does not compile is still found, by compileRest, without any request.
import Fastify from 'fastify';
import t from 'tap';
import { LazySchemas } from '../../src/gateway/lazy-schemas.js';

const body = { type: 'object', required: ['name'], properties: { name: { type: 'string' } } };
const answer = { type: 'object', properties: { ok: { type: 'boolean' } } };

t.test("validators and serializers answer as Fastify's own", async (t) => {
  const schemas = new LazySchemas();
  const app = Fastify({ schemaController: { compilersFactory: schemas.compilersFactory } });
  app.post('/a', { schema: { body, response: { 200: answer } } }, async () => ({ ok: true, unlisted: 1 }));
  await app.ready();
  const refused = await app.inject({ method: 'POST', url: '/a', payload: {} });
  t.equal(refused.statusCode, 400);
  t.match(refused.json(), { message: "body must have required property 'name'" });
  const served = await app.inject({ method: 'POST', url: '/a', payload: { name: 'x' } });
  t.equal(served.statusCode, 200);
  t.same(served.json(), { ok: true }, 'the serializer drops what the schema does not list');
  await schemas.compileRest();
  await app.close();
});

t.test('a schema that does not compile: the app starts, compileRest rejects', async (t) => {
  const schemas = new LazySchemas();
  const app = Fastify({ schemaController: { compilersFactory: schemas.compilersFactory } });
  app.get('/ok', { schema: { response: { 200: answer } } }, async () => ({ ok: true }));
  const broken = { type: 'object', properties: { x: { type: 'nonsense' } } };
  app.get('/broken', { schema: { querystring: broken } }, async () => ({}));
  await app.ready();
  await t.rejects(schemas.compileRest(), /schema is invalid/);
  const res = await app.inject({ method: 'GET', url: '/broken' });
  t.equal(res.statusCode, 500, 'a request to it fails too');
  await app.close();
});
