// PATCH: the patch type (query patchType, docs/resources.md) mapped to the content type the API
// server expects, and the patch document checked before it goes upstream. JSON patches are
// validated with fast-json-patch (RFC 6902 operation shapes, paths, missing values).
import jsonPatch from 'fast-json-patch';
import { BadRequestError } from '../errors.js';
import { isPlainObject } from './write-body.js';

export type PatchType = 'strategic' | 'merge' | 'json' | 'apply';

/** Values of the patchType query parameter; absent means strategic merge. */
export const PATCH_TYPE_VALUES = ['merge', 'json', 'apply'] as const;

export const PATCH_CONTENT_TYPES: Record<PatchType, string> = {
  strategic: 'application/strategic-merge-patch+json',
  merge: 'application/merge-patch+json',
  json: 'application/json-patch+json',
  apply: 'application/apply-patch+yaml',
};

/**
 * The patch type: the patchType query parameter when given; else a specific patch content type
 * the client sent (kubectl-style); else strategic merge.
 */
export function patchTypeOf(patchType: string | undefined, contentType: string | undefined): PatchType {
  if (patchType !== undefined) {
    if (!(PATCH_TYPE_VALUES as readonly string[]).includes(patchType)) {
      throw new BadRequestError(
        `unknown patchType "${patchType}": use merge, json or apply, or leave it out for a strategic merge patch`,
      );
    }
    return patchType as PatchType;
  }
  const mime = (contentType ?? '').split(';')[0].trim().toLowerCase();
  for (const [type, known] of Object.entries(PATCH_CONTENT_TYPES)) {
    if (mime === known) return type as PatchType;
  }
  return 'strategic';
}

export interface PatchContext {
  resource: string;
  namespace: string | undefined;
  name: string;
  fieldManager: string | undefined;
}

/** Checks the parsed patch document for its type; returns the body to send upstream. */
export function preparePatch(type: PatchType, body: unknown, context: PatchContext): string {
  if (body === undefined || body === null || body === '')
    throw new BadRequestError('request body required: a patch document');
  if (type === 'json') {
    if (!Array.isArray(body)) throw new BadRequestError('a JSON patch (patchType=json) must be an array of operations');
    const error = jsonPatch.validate(body as jsonPatch.Operation[]);
    if (error) {
      throw new BadRequestError(`invalid JSON patch: operation ${error.index ?? 0}: ${firstLine(error.message)}`);
    }
    return JSON.stringify(body);
  }
  if (!isPlainObject(body)) {
    const kind = type === 'apply' ? 'server-side apply' : `${type} merge`;
    const hint = Array.isArray(body) ? ' (use patchType=json for an array of operations)' : '';
    throw new BadRequestError(`a ${kind} patch must be a JSON object${hint}`);
  }
  if (type === 'apply' && !context.fieldManager) {
    throw new BadRequestError('patchType=apply (server-side apply) requires the fieldManager query parameter');
  }
  const metadata = body.metadata;
  if (metadata !== undefined && metadata !== null) {
    if (!isPlainObject(metadata)) throw new BadRequestError('metadata must be an object');
    const { namespace, name } = metadata;
    if (namespace !== undefined && namespace !== null && namespace !== (context.namespace ?? '')) {
      const path = context.namespace ? `"${context.namespace}"` : `${context.resource} are cluster-scoped`;
      throw new BadRequestError(`metadata.namespace "${text(namespace)}" differs from the path (${path})`);
    }
    if (name !== undefined && name !== null && name !== context.name) {
      throw new BadRequestError(`metadata.name "${text(name)}" differs from the name in the path "${context.name}"`);
    }
  }
  return JSON.stringify(body);
}

/** A body value as text: a string as is, anything else as JSON (not "[object Object]"). */
function text(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function firstLine(message: string): string {
  return message.split('\n')[0];
}
