// Kubernetes object names for things whose own names need not be DNS-safe (usernames with
// capitals or "_", cluster names like "kubernetes-admin@prod"). The mapping is deterministic, so
// creating the object for a given name twice collides in the API server: an atomic create decides
// uniqueness, never a check-then-insert.
import { createHash } from 'node:crypto';

const DNS_LABELISH = /^[a-z0-9]([-a-z0-9.]{0,51}[a-z0-9])?$/;

/**
 * `prefix-name` when name is already lower-case DNS-safe and short; otherwise
 * `prefix-x-<readable part>-<hash of the exact name>`. Two different names never map to one.
 */
export function objectNameFor(prefix: string, name: string): string {
  // Names starting with "x-" take the hashed form too, so that form is never produced twice.
  if (DNS_LABELISH.test(name) && !name.includes('..') && !name.startsWith('x-')) return `${prefix}-${name}`;
  const readable = name
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 30)
    .replace(/-+$/, '');
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 12);
  return `${prefix}-x-${readable ? `${readable}-` : ''}${hash}`;
}
