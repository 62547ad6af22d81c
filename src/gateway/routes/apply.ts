// POST /api/v1/resources/apply {yaml[, force, dryRun, namespace]}: Kite's "+" dialog and its
// history rollback. Multi-document YAML applied with server-side apply, every document resolved
// through discovery, authorized (create and patch on its resource in its namespace, and the host
// guard) and dry-run before anything is written (src/tools/apply.ts). The answer keeps Kite's
// {message, kind, name, namespace} (of the first document) and adds each document's outcome;
// a failure answers the failing document's status with the outcomes in details.documents.
import { Type } from 'typebox';
import { HttpError } from '../../errors.js';
import { parseApplyDocuments } from '../../tools/apply-documents.js';
import { applyAuthorizer, applyDocuments, type ApplyAnswer, type DocumentOutcome } from '../../tools/apply.js';
import { clusterQueryProperties, clusterSchema, objectOf, stringEnum, type App } from '../schemas.js';
import { auditObject } from '../tool-audit.js';
import { toolRequest, withClientSignal } from '../tool-request.js';
import { DNS_LABEL_PATTERN } from '../../cluster-access/segments.js';

const namespace = (description?: string) =>
  Type.String({
    maxLength: 63,
    pattern: DNS_LABEL_PATTERN,
    ...(description ? { description } : {}),
  });
const string = Type.String();

const ApplyQuery = Type.Object({
  force: Type.Optional(Type.Boolean()),
  dryRun: Type.Optional(stringEnum(['All'])),
  namespace: Type.Optional(namespace()),
  ...clusterQueryProperties,
});

const ApplyBody = Type.Object(
  {
    yaml: Type.String({ minLength: 1, description: 'one or more YAML (or JSON) documents separated by ---' }),
    force: Type.Optional(
      Type.Boolean({ description: 'take ownership of fields other managers own (server-side apply force)' }),
    ),
    dryRun: Type.Optional(Type.Boolean({ description: 'only check: nothing is written' })),
    namespace: Type.Optional(namespace('the namespace of namespaced documents that name none (default: default)')),
  },
  { additionalProperties: false },
);

const Outcome = objectOf({
  position: Type.Integer({ description: '1-based position of the document in the file' }),
  apiVersion: string,
  kind: string,
  name: string,
  namespace: string,
  resource: string,
  result: stringEnum(['created', 'configured', 'failed', 'not-applied', 'not-checked', 'removed']),
  status: Type.Integer(),
  reason: string,
  error: string,
});

const ApplyReply = objectOf({
  message: string,
  kind: string,
  name: string,
  namespace: string,
  dryRun: Type.Boolean(),
  documents: Type.Array(Outcome),
});

export default async function applyRoutes(app: App) {
  app.post(
    '/api/v1/resources/apply',
    {
      onRequest: app.requireUser,
      schema: clusterSchema(
        'Apply multi-document YAML with server-side apply (field manager kiteline), all documents dry-run first',
        {
          description:
            'Each document is resolved through discovery ' +
            '(CRDs of the same file included: they are applied first and waited for), authorized ' +
            '(create and patch), and dry-run before anything is written. ' +
            'Conflicts with other field managers fail the apply unless force is set.',
          querystring: ApplyQuery,
          body: ApplyBody,
          response: { 200: ApplyReply },
        },
      ),
    },
    withClientSignal(async (request, reply, signal) => {
      const { body, query } = request;
      const documents = parseApplyDocuments(body.yaml);
      const dryRun = body.dryRun === true || query.dryRun === 'All';
      const force = body.force === true || query.force === true;
      // Long-running: a CRD of the file may take seconds to become established.
      const ctx = await toolRequest(app, request, reply, signal, true);
      const { conn } = ctx;
      request.auditDetail = { verb: 'apply', cluster: conn.name, resource: 'documents', dryRun };
      const audit = (outcomes: DocumentOutcome[]) => {
        for (const o of outcomes) {
          if (o.result === 'not-applied' || o.result === 'not-checked') continue;
          auditObject(request, {
            cluster: conn.name,
            verb: 'apply',
            resource: o.resource ?? o.kind,
            namespace: o.namespace,
            name: o.name,
            status: o.status ?? (o.result === 'removed' ? 200 : 400),
            dryRun,
          });
        }
      };
      let answer: ApplyAnswer;
      try {
        answer = await applyDocuments(ctx, documents, {
          force,
          dryRun,
          defaultNamespace: body.namespace ?? query.namespace ?? 'default',
          authorize: applyAuthorizer(app.services, ctx),
        });
      } catch (err) {
        if (err instanceof HttpError)
          audit((err.details as { documents?: DocumentOutcome[] } | undefined)?.documents ?? []);
        throw err;
      }
      audit(answer.documents);
      return answer;
    }),
  );
}
