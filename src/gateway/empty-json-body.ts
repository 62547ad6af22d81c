// Kite's UI sends `Content-Type: application/json` on every request, also on a POST or DELETE
// without a body, which Fastify's JSON parser refuses (FST_ERR_CTP_EMPTY_JSON_BODY, a 400). A route
// module that Kite's UI calls that way makes an empty JSON body mean "no body", in its own
// (encapsulated) scope only; a body that is there is parsed as always.
import type { FastifyInstance } from 'fastify';

export function acceptEmptyJsonBody(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') return done(null, undefined);
    return parseJson(request, body as string, done);
  });
}
