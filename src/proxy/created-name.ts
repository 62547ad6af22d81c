// The one body the proxy reads: a create of a CustomResourceDefinition or an APIService on kiteline's
// host cluster, whose name (<plural>.<group>, <version>.<group>) says whether it claims kiteline.io.
// Everywhere else the proxy streams bodies unread; here the body is read whole (at most 1 MiB, a CRD
// is rarely above 200 KiB), its metadata.name checked by the host guard, and the same bytes sent on.
// Only JSON and YAML are read (kubectl sends JSON); any other encoding is 415, since a body kiteline
// cannot read cannot be let through unchecked.
import type { Readable } from 'node:stream';
import { HttpError, PayloadTooLargeError } from '../errors.js';
import { parseJsonBody, parseYamlBody } from '../cluster-access/body-parsers.js';

const MAX_CREATE_BODY = 1024 * 1024;
const JSON_TYPES: ReadonlySet<string> = new Set(['application/json']);
const YAML_TYPES: ReadonlySet<string> = new Set(['application/yaml', 'application/x-yaml']);

export interface ReadCreate {
  /** The body as it arrived, to send upstream. */
  body: Buffer;
  /** metadata.name, when the body has one. */
  name: string | undefined;
}

/** Reads a create's body (bounded) and its metadata.name; 415 for an encoding kiteline cannot read. */
export async function readCreatedName(stream: Readable, contentType: string | undefined): Promise<ReadCreate> {
  const mediaType = (contentType ?? 'application/json').split(';', 1)[0].trim().toLowerCase();
  const json = JSON_TYPES.has(mediaType);
  if (!json && !YAML_TYPES.has(mediaType)) {
    throw new HttpError(
      415,
      'UnsupportedMediaType',
      `on kiteline's host cluster this create is checked by name: send JSON or YAML, not ${mediaType.slice(0, 64)}`,
    );
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += (chunk as Buffer).length;
    if (size > MAX_CREATE_BODY) throw new PayloadTooLargeError('the object is larger than 1 MiB');
    chunks.push(chunk as Buffer);
  }
  const body = Buffer.concat(chunks);
  const text = body.toString('utf8');
  const object = json ? parseJsonBody(text) : parseYamlBody(text);
  const name = (object as { metadata?: { name?: unknown } } | undefined)?.metadata?.name;
  return { body, name: typeof name === 'string' ? name : undefined };
}
