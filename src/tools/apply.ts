// POST /api/v1/resources/apply: the documents of one YAML file applied with server-side apply
// (field manager `kiteline`), all or nothing as far as the API allows:
//   1. resolve each document's kind through the cluster's discovery of its apiVersion; a kind a
//      CustomResourceDefinition of the same file defines is taken from that CRD;
//   2. authorize each document (the caller's callback: create and patch in its namespace);
//   3. dry-run every document (dryRun=All): the API server's own validation, admission and
//      field-ownership conflicts; any failure and nothing is written;
//   4. apply the "foundations" first: CRDs (then wait until established and refresh discovery)
//      and Namespaces;
//   5. dry-run the documents that could not be dry-run before their foundation existed (custom
//      resources of a CRD in the file, objects in a namespace the file creates); a failure there
//      removes the foundations this apply created (by UID) and nothing else was written;
//   6. apply the rest in file order, stopping at the first failure (a race after a good dry run).
// The answer lists every document's outcome.
import type { ResolvedResource } from '../clusters/types.js';
import { GatewayTimeoutError, HttpError } from '../errors.js';
import { canonicalResourceName, objectPath } from '../cluster-access/target.js';
import type { ApplyDocument } from './apply-documents.js';
import { KindResolver } from './kinds.js';
import { requireAccess } from '../cluster-access/access.js';
import { getJson, tryWrite, type KubeObject, type ToolContext } from '../cluster-access/calls.js';
import type { CallerContext, ReadKit } from '../cluster-access/reads.js';

export const FIELD_MANAGER = 'kiteline';
const APPLY_CONTENT_TYPE = 'application/apply-patch+yaml';
/** How long a CRD of the file may take to become established (and its kinds discoverable). */
const CRD_ESTABLISH_TIMEOUT_MS = 30_000;
const CRD_POLL_MS = 200;

export type DocumentResult = 'created' | 'configured' | 'failed' | 'not-applied' | 'not-checked' | 'removed';

/** One document's outcome in the answer. */
export interface DocumentOutcome {
  position: number;
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
  /** The resource as roles name it ("deployments", "widgets.example.com"), once resolved. */
  resource?: string;
  result: DocumentResult;
  /** The cluster's status code for this document (201 created, 200 configured, 4xx failed). */
  status?: number;
  reason?: string;
  error?: string;
}

export interface ApplyAnswer {
  message: string;
  /** The first document's kind, name and namespace (Kite's answer carries one object). */
  kind: string;
  name: string;
  namespace: string;
  dryRun: boolean;
  documents: DocumentOutcome[];
}

export interface ApplyOptions {
  force: boolean;
  dryRun: boolean;
  /** The namespace of namespaced documents that name none. */
  defaultNamespace: string;
  /** Throws (403) unless the caller may create and patch this resource in this namespace. */
  authorize(resolved: ResolvedResource, resource: string, namespace: string | undefined, name: string): Promise<void>;
}

/** Each document's authorization for a caller: create and patch there, kiteline's roles then the host guard. */
export function applyAuthorizer(kit: ReadKit, ctx: CallerContext): ApplyOptions['authorize'] {
  return async (resolved, resource, namespace, name) => {
    for (const verb of ['create', 'patch'] as const) {
      requireAccess(kit.auth, ctx.principal, ctx.conn.name, resource, namespace, verb);
      await kit.hostGuard.check(ctx.conn, { resolved, namespace, name, verb });
    }
  };
}

/** A document with its resource and namespace settled. */
interface Planned {
  doc: ApplyDocument;
  outcome: DocumentOutcome;
  /** Undefined until a CRD of the file is established. */
  resolved: ResolvedResource | undefined;
  /** The kind comes from a CRD of this file: no dry run before it exists. */
  fromFileCrd: boolean;
  namespace: string | undefined;
  /** A CRD or Namespace: applied before the rest. */
  foundation: boolean;
  /** Set when the first dry run found its namespace missing and this file creates it. */
  deferred: boolean;
  /** The UID of an object this apply created (foundations are removed by UID on rollback). */
  createdUid?: string;
  /** The cluster's answer to the last failed write of this document. */
  lastError?: HttpError;
}

interface CrdKind {
  group: string;
  versions: string[];
  kind: string;
  plural: string;
  namespaced: boolean;
  crdName: string;
}

function isCrd(doc: ApplyDocument): boolean {
  return doc.kind === 'CustomResourceDefinition' && doc.apiVersion.startsWith('apiextensions.k8s.io/');
}

function isNamespace(doc: ApplyDocument): boolean {
  return doc.kind === 'Namespace' && doc.apiVersion === 'v1';
}

/** The kinds the CRDs of the file define: "group/version|Kind" → what the CRD says of it. */
function kindsDefinedIn(docs: ApplyDocument[]): Map<string, CrdKind> {
  const kinds = new Map<string, CrdKind>();
  for (const doc of docs.filter(isCrd)) {
    const spec = (doc.object.spec ?? {}) as {
      group?: unknown;
      scope?: unknown;
      version?: unknown;
      versions?: Array<{ name?: unknown }>;
      names?: { kind?: unknown; plural?: unknown };
    };
    const versions = [...(Array.isArray(spec.versions) ? spec.versions.map((v) => v?.name) : []), spec.version].filter(
      (v): v is string => typeof v === 'string',
    );
    if (
      typeof spec.group !== 'string' ||
      typeof spec.names?.kind !== 'string' ||
      typeof spec.names?.plural !== 'string'
    )
      continue;
    for (const version of versions) {
      kinds.set(`${spec.group}/${version}|${spec.names.kind}`, {
        group: spec.group,
        versions,
        kind: spec.names.kind,
        plural: spec.names.plural,
        namespaced: spec.scope !== 'Cluster',
        crdName: doc.name,
      });
    }
  }
  return kinds;
}

function describe(p: Pick<DocumentOutcome, 'position' | 'kind' | 'name' | 'namespace'>): string {
  return `document ${p.position} (${p.kind} ${p.namespace ? `${p.namespace}/` : ''}${p.name})`;
}

/** Fails the whole apply with the first failed document's status; `details.documents` lists all. */
function failure(planned: Planned[], failed: Planned, what: string): HttpError {
  const o = failed.outcome;
  return new HttpError(o.status ?? 400, o.reason ?? 'BadRequest', `${describe(o)}: ${o.error ?? 'failed'}; ${what}`, {
    documents: planned.map((p) => p.outcome),
  });
}

function fail(p: Planned, err: HttpError): void {
  p.lastError = err;
  p.outcome.result = 'failed';
  p.outcome.status = err.status;
  p.outcome.reason = err.reason;
  p.outcome.error = err.message;
}

/** The body sent: the document with its namespace settled (and none on cluster-scoped kinds). */
function bodyOf(p: Planned): Record<string, unknown> {
  const metadata = { ...(p.doc.object.metadata as Record<string, unknown>) };
  if (p.namespace === undefined) delete metadata.namespace;
  else metadata.namespace = p.namespace;
  return { ...p.doc.object, metadata };
}

function applyPath(p: Planned, options: { force: boolean; dryRun: boolean }): string {
  const search = new URLSearchParams({ fieldManager: FIELD_MANAGER });
  if (options.force) search.set('force', 'true');
  if (options.dryRun) search.set('dryRun', 'All');
  return `${objectPath(p.resolved!, p.namespace, p.doc.name)}?${search}`;
}

/** One server-side apply of one document; records the outcome and returns whether it succeeded. */
async function applyOne(ctx: ToolContext, p: Planned, options: { force: boolean; dryRun: boolean }): Promise<boolean> {
  const path = applyPath(p, options);
  const outcome = await tryWrite(
    ctx,
    'PATCH',
    path,
    APPLY_CONTENT_TYPE,
    bodyOf(p),
    objectPath(p.resolved!, p.namespace, p.doc.name),
  );
  if (!outcome.ok) {
    fail(p, outcome.error);
    return false;
  }
  p.outcome.result = outcome.status === 201 ? 'created' : 'configured';
  p.outcome.status = outcome.status;
  delete p.outcome.error;
  delete p.outcome.reason;
  if (!options.dryRun && outcome.status === 201) p.createdUid = outcome.object.metadata?.uid;
  return true;
}

/** Its dry run found its namespace missing, and this file creates that namespace. */
function missingNamespaceOfFile(p: Planned, planned: Planned[]): boolean {
  const details = p.lastError?.details as { kind?: string; name?: string } | undefined;
  return (
    p.lastError?.status === 404 &&
    details?.kind === 'namespaces' &&
    details.name === p.namespace &&
    planned.some((q) => isNamespace(q.doc) && q.doc.name === p.namespace)
  );
}

/** Waits until the CRD is established, then until its kinds are in discovery. */
async function waitEstablished(
  ctx: ToolContext,
  resolver: KindResolver,
  crd: Planned,
  kinds: CrdKind[],
): Promise<void> {
  const deadline = Date.now() + CRD_ESTABLISH_TIMEOUT_MS;
  const path = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${encodeURIComponent(crd.doc.name)}`;
  for (;;) {
    // kiteline's own credentials: the caller just created it, but may lack `get` on CRDs.
    const object = await getJson<KubeObject>(ctx, path, {});
    const conditions =
      (object.status as { conditions?: Array<{ type?: string; status?: string }> } | undefined)?.conditions ?? [];
    const established = conditions.some((c) => c.type === 'Established' && c.status === 'True');
    if (established) {
      let served = true;
      for (const k of kinds) {
        for (const version of k.versions) {
          resolver.forget(`${k.group}/${version}`);
          if (!(await resolver.resolve(`${k.group}/${version}`, k.kind))) served = false;
        }
      }
      if (served) {
        // The connection's own discovery cache learns the new kinds too (the UI lists them next).
        for (const k of kinds) await ctx.conn.resolveResource(`${k.plural}.${k.group}`);
        return;
      }
    }
    if (Date.now() > deadline)
      throw new GatewayTimeoutError(
        `CustomResourceDefinition ${crd.doc.name} did not become established ` +
          `within ${CRD_ESTABLISH_TIMEOUT_MS / 1000} s`,
      );
    await new Promise((r) => setTimeout(r, CRD_POLL_MS));
  }
}

/** Removes the foundations this apply created (by UID: never an object someone else made since). */
async function removeCreatedFoundations(ctx: ToolContext, planned: Planned[]): Promise<void> {
  for (const p of [...planned].reverse()) {
    if (!p.foundation || !p.createdUid) continue;
    const body = { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: p.createdUid } };
    const outcome = await tryWrite(
      ctx,
      'DELETE',
      objectPath(p.resolved!, p.namespace, p.doc.name),
      'application/json',
      body,
    );
    if (outcome.ok || outcome.status === 404) {
      p.outcome.result = 'removed';
      p.outcome.error = 'created, then removed again because a later document failed its dry run';
    } else {
      const why = outcome.error.message;
      p.outcome.error = `created, but could not be removed again after a later document failed: ${why}`;
    }
  }
}

/** Applies the documents; throws an HttpError with `details.documents` when any fails. */
export async function applyDocuments(
  ctx: ToolContext,
  docs: ApplyDocument[],
  options: ApplyOptions,
): Promise<ApplyAnswer> {
  const resolver = new KindResolver(ctx);
  const fileKinds = kindsDefinedIn(docs);
  const planned: Planned[] = [];

  // 1. Kinds and namespaces.
  for (const doc of docs) {
    const outcome: DocumentOutcome = {
      position: doc.position,
      apiVersion: doc.apiVersion,
      kind: doc.kind,
      name: doc.name,
      result: 'not-applied',
    };
    let resolved = await resolver.resolve(doc.apiVersion, doc.kind);
    let fromFileCrd = false;
    if (!resolved) {
      const defined = fileKinds.get(`${doc.apiVersion}|${doc.kind}`);
      if (defined) {
        const version = doc.apiVersion.slice(doc.apiVersion.indexOf('/') + 1);
        resolved = {
          group: defined.group,
          version,
          resource: defined.plural,
          kind: defined.kind,
          namespaced: defined.namespaced,
          verbs: [],
        };
        fromFileCrd = true;
      }
    }
    const namespace = resolved?.namespaced ? (doc.namespace ?? options.defaultNamespace) : undefined;
    if (namespace !== undefined) outcome.namespace = namespace;
    const p: Planned = {
      doc,
      outcome,
      resolved,
      fromFileCrd,
      namespace,
      foundation: isCrd(doc) || isNamespace(doc),
      deferred: false,
    };
    planned.push(p);
    if (!resolved) {
      fail(
        p,
        new HttpError(
          404,
          'NotFound',
          `the cluster serves no kind ${doc.kind} in ${doc.apiVersion} ` +
            '(and no CustomResourceDefinition of this file defines it)',
        ),
      );
      throw failure(planned, p, 'nothing was applied');
    }
    outcome.resource = canonicalResourceName(resolved);
  }

  // 2. Authorization of every document before anything is sent.
  for (const p of planned) {
    try {
      await options.authorize(p.resolved!, p.outcome.resource!, p.namespace, p.doc.name);
    } catch (err) {
      if (!(err instanceof HttpError)) throw err;
      fail(p, err);
      throw failure(planned, p, 'nothing was applied');
    }
  }

  // 3. Dry run of everything that can be checked now.
  for (const p of planned) {
    if (p.fromFileCrd) {
      p.outcome.result = 'not-checked';
      continue;
    }
    if (await applyOne(ctx, p, { force: options.force, dryRun: true })) continue;
    if (missingNamespaceOfFile(p, planned)) {
      p.deferred = true;
      p.outcome.result = 'not-checked';
      delete p.outcome.status;
      delete p.outcome.reason;
      delete p.outcome.error;
      continue;
    }
    for (const q of planned) if (q !== p && q.outcome.result !== 'failed') q.outcome.result = 'not-applied';
    throw failure(planned, p, 'nothing was applied (every document was dry-run first)');
  }

  const first = planned[0];
  const answer = (message: string): ApplyAnswer => ({
    message,
    kind: first.doc.kind,
    name: first.doc.name,
    namespace: first.namespace ?? '',
    dryRun: options.dryRun,
    documents: planned.map((p) => p.outcome),
  });
  if (options.dryRun) {
    const unchecked = planned.filter((p) => p.outcome.result === 'not-checked').length;
    const note = unchecked
      ? ` (${unchecked} not checked: they need a CustomResourceDefinition or Namespace of this file to exist first)`
      : '';
    return answer(`dry run: ${planned.length - unchecked} of ${planned.length} documents would be applied${note}`);
  }
  // From here on an outcome says what really happened.
  for (const p of planned) {
    p.outcome.result = 'not-applied';
    delete p.outcome.status;
  }

  // 4. Foundations: CRDs and Namespaces, in file order; CRDs are waited for.
  for (const p of planned.filter((q) => q.foundation)) {
    if (!(await applyOne(ctx, p, { force: options.force, dryRun: false }))) {
      await removeCreatedFoundations(ctx, planned);
      throw failure(
        planned,
        p,
        'the documents before it in the order CRDs, Namespaces, the rest were applied (see details)',
      );
    }
    if (isCrd(p.doc)) {
      const kinds = [...fileKinds.values()].filter((k) => k.crdName === p.doc.name);
      await waitEstablished(
        ctx,
        resolver,
        p,
        kinds.filter((k, i) => kinds.findIndex((o) => o.kind === k.kind) === i),
      );
    }
  }

  // 5. Dry run of what needed a foundation; a failure removes the foundations this apply created.
  for (const p of planned.filter((q) => !q.foundation && (q.fromFileCrd || q.deferred))) {
    if (p.fromFileCrd) {
      const resolved = await resolver.resolve(p.doc.apiVersion, p.doc.kind);
      if (resolved) p.resolved = resolved;
    }
    if (!(await applyOne(ctx, p, { force: options.force, dryRun: true }))) {
      await removeCreatedFoundations(ctx, planned);
      throw failure(
        planned,
        p,
        'its dry run failed after the CRDs and Namespaces of the file were applied; ' +
          'those this apply created were removed again',
      );
    }
    p.outcome.result = 'not-applied';
    delete p.outcome.status;
  }

  // 6. Everything else, in file order.
  for (const p of planned.filter((q) => !q.foundation)) {
    if (!(await applyOne(ctx, p, { force: options.force, dryRun: false }))) {
      throw failure(
        planned,
        p,
        'it failed after a successful dry run (the cluster changed meanwhile); ' +
          'the documents marked created or configured were applied',
      );
    }
  }
  return answer(`applied ${planned.length} document${planned.length === 1 ? '' : 's'}`);
}
