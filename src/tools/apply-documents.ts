// The documents of POST /api/v1/resources/apply: multi-document YAML (or JSON, which is YAML)
// parsed with the `yaml` library, each document checked for what server-side apply needs
// (apiVersion, kind, metadata.name) before anything goes to a cluster. `kind: List` documents
// are expanded into their items, as kubectl does. The text and the number of documents are
// bounded; a bad document is a 400 naming its position, and nothing is sent anywhere.
import { parseAllDocuments } from 'yaml';
import { BadRequestError, PayloadTooLargeError } from '../errors.js';
import { DNS_LABEL, NAME_PATTERN } from '../cluster-access/segments.js';
import { isPlainObject } from '../cluster-access/write-body.js';

/** The YAML text of one apply: at most this many bytes (a big Helm chart's output is ~300 KiB). */
export const MAX_APPLY_YAML_BYTES = 2 * 1024 * 1024;
/** At most this many documents (after `List` expansion) per apply. */
export const MAX_APPLY_DOCUMENTS = 100;
/** YAML aliases expanded per document at most (a "billion laughs" document is refused). */
const MAX_ALIASES = 100;

const KIND = /^[A-Za-z][A-Za-z0-9]{0,62}$/;
const NAME = new RegExp(NAME_PATTERN);

/** One document to apply, as the file gave it (metadata.managedFields dropped). */
export interface ApplyDocument {
  /** 1-based position in the file (items of a List share their List's position). */
  position: number;
  apiVersion: string;
  kind: string;
  name: string;
  /** metadata.namespace when the document names one. */
  namespace: string | undefined;
  object: Record<string, unknown>;
}

function refuse(position: number, message: string): never {
  throw new BadRequestError(`document ${position}: ${message}; nothing was applied`);
}

/** Checks one object and returns it as an ApplyDocument. */
function checkedDocument(value: unknown, position: number): ApplyDocument {
  if (!isPlainObject(value)) refuse(position, 'not an object (a Kubernetes object has apiVersion, kind and metadata)');
  const object = value;
  const { apiVersion, kind } = object;
  if (typeof apiVersion !== 'string' || apiVersion === '' || apiVersion.length > 253)
    refuse(position, 'apiVersion is missing');
  if (typeof kind !== 'string' || !KIND.test(kind)) refuse(position, 'kind is missing or not a kind name');
  const metadata = object.metadata;
  if (!isPlainObject(metadata)) refuse(position, `${kind}: metadata is missing`);
  const meta = metadata;
  if (typeof meta.name !== 'string' || !NAME.test(meta.name) || meta.name.includes('..')) {
    refuse(
      position,
      `${kind}: metadata.name is missing or not a valid name ` +
        '(server-side apply needs a name; generateName is not supported)',
    );
  }
  if (meta.namespace !== undefined && (typeof meta.namespace !== 'string' || !DNS_LABEL.test(meta.namespace))) {
    refuse(position, `${kind} ${meta.name}: metadata.namespace is not a namespace name`);
  }
  // Server-side apply refuses a body carrying managedFields; objects copied from a GET carry them.
  delete meta.managedFields;
  return {
    position,
    apiVersion,
    kind,
    name: meta.name,
    namespace: meta.namespace,
    object,
  };
}

/** Parses and checks the documents of an apply; throws 400 (or 413) without touching anything. */
export function parseApplyDocuments(text: string): ApplyDocument[] {
  if (Buffer.byteLength(text, 'utf8') > MAX_APPLY_YAML_BYTES) {
    throw new PayloadTooLargeError(
      `the YAML is larger than ${MAX_APPLY_YAML_BYTES} bytes: split it into several applies`,
    );
  }
  const parsed = parseAllDocuments(text, { uniqueKeys: true });
  const yamlDocuments = Array.isArray(parsed) ? parsed : [];
  const documents: ApplyDocument[] = [];
  yamlDocuments.forEach((doc, i) => {
    const position = i + 1;
    const problem = doc.errors[0];
    if (problem) refuse(position, `invalid YAML: ${problem.message.split('\n')[0]}`);
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: MAX_ALIASES });
    } catch (err) {
      refuse(position, `invalid YAML: ${(err as Error).message.split('\n')[0]}`);
    }
    if (value === null || value === undefined) return; // an empty document (`---` at the end)
    if (
      isPlainObject(value) &&
      (value as { kind?: unknown }).kind === 'List' &&
      Array.isArray((value as { items?: unknown }).items)
    ) {
      for (const item of (value as { items: unknown[] }).items) documents.push(checkedDocument(item, position));
    } else {
      documents.push(checkedDocument(value, position));
    }
    if (documents.length > MAX_APPLY_DOCUMENTS) {
      throw new BadRequestError(
        `more than ${MAX_APPLY_DOCUMENTS} documents: split the file into several applies; nothing was applied`,
      );
    }
  });
  if (documents.length === 0) throw new BadRequestError('the YAML holds no document to apply');
  return documents;
}
