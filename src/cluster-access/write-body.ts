// Checks and completes the object of a create (POST) or replace (PUT) before it goes upstream:
// it must be a JSON object of the path's kind; metadata.namespace must equal the path's namespace
// or is filled from it (that namespace is the one authorized); PUT needs metadata.name equal to
// the path's name and a metadata.resourceVersion (409 from the cluster when stale).
import type { ResolvedResource } from '../clusters/types.js';
import { BadRequestError } from '../errors.js';
import { apiVersionOf } from './target.js';
import { DNS_LABEL } from './segments.js';

export type KubeObject = Record<string, unknown> & { metadata: Record<string, unknown> };

export interface PreparedWrite {
  object: KubeObject;
  /** The namespace the object is written to (undefined for cluster-scoped kinds). */
  namespace: string | undefined;
  /** metadata.name, when the body has one (a create may use generateName). */
  name: string | undefined;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Validates a create or replace body against the target. `pathNamespace` is undefined for a
 * cluster-scoped kind or a create under _all; `pathName` is set for PUT.
 */
export function prepareWrite(
  body: unknown,
  resolved: ResolvedResource,
  resource: string,
  pathNamespace: string | undefined,
  pathName: string | undefined,
  method: 'POST' | 'PUT',
): PreparedWrite {
  if (body === undefined || body === null || body === '')
    throw new BadRequestError('request body required: a Kubernetes object');
  if (!isPlainObject(body)) throw new BadRequestError('request body must be a JSON object (a Kubernetes object)');
  const metadata = body.metadata ?? {};
  if (!isPlainObject(metadata)) throw new BadRequestError('metadata must be an object');
  const object = { ...body, metadata: { ...metadata } } as KubeObject;

  checkTypeMeta(object, resolved, resource);

  const bodyNamespace = object.metadata.namespace;
  if (bodyNamespace !== undefined && bodyNamespace !== '' && typeof bodyNamespace !== 'string')
    throw new BadRequestError('metadata.namespace must be a string');
  let namespace: string | undefined;
  if (!resolved.namespaced) {
    if (bodyNamespace)
      throw new BadRequestError(`${resource} are cluster-scoped: remove metadata.namespace ("${bodyNamespace}")`);
    delete object.metadata.namespace;
  } else if (pathNamespace !== undefined) {
    if (bodyNamespace && bodyNamespace !== pathNamespace) {
      throw new BadRequestError(
        `metadata.namespace "${bodyNamespace}" differs from the namespace in the path "${pathNamespace}"`,
      );
    }
    namespace = pathNamespace;
    object.metadata.namespace = namespace;
  } else {
    if (!bodyNamespace)
      throw new BadRequestError(`${resource} are namespaced: put the namespace in the path or in metadata.namespace`);
    if (!DNS_LABEL.test(bodyNamespace)) throw new BadRequestError(`invalid metadata.namespace "${bodyNamespace}"`);
    namespace = bodyNamespace;
  }

  const bodyName = object.metadata.name;
  if (bodyName !== undefined && typeof bodyName !== 'string')
    throw new BadRequestError('metadata.name must be a string');
  let name = bodyName || undefined;
  if (method === 'PUT') {
    if (bodyName && bodyName !== pathName)
      throw new BadRequestError(`metadata.name "${bodyName}" differs from the name in the path "${pathName}"`);
    name = pathName;
    object.metadata.name = pathName;
    const rv = object.metadata.resourceVersion;
    if (typeof rv !== 'string' || rv === '') {
      throw new BadRequestError(
        'metadata.resourceVersion is required on PUT: send the object as last read (or use PATCH)',
      );
    }
  } else if (!name && !object.metadata.generateName) {
    throw new BadRequestError('metadata.name (or metadata.generateName) is required');
  }
  return { object, namespace, name: name };
}

/** apiVersion and kind: filled from discovery when absent, refused when they name another kind. */
function checkTypeMeta(object: KubeObject, resolved: ResolvedResource, resource: string): void {
  const { kind, apiVersion } = object;
  if (kind === undefined || kind === '') object.kind = resolved.kind;
  else if (typeof kind !== 'string') throw new BadRequestError('kind must be a string');
  else if (kind !== resolved.kind)
    throw new BadRequestError(`kind "${kind}" does not match ${resource} (kind ${resolved.kind})`);

  if (apiVersion === undefined || apiVersion === '') {
    object.apiVersion = apiVersionOf(resolved);
    return;
  }
  if (typeof apiVersion !== 'string') throw new BadRequestError('apiVersion must be a string');
  const group = apiVersion.includes('/') ? apiVersion.slice(0, apiVersion.lastIndexOf('/')) : '';
  if (group !== resolved.group) {
    throw new BadRequestError(
      `apiVersion "${apiVersion}" does not belong to ${resource} (group "${resolved.group || 'core'}")`,
    );
  }
}
