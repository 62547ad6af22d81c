// The label and field selectors a cached list can answer itself, as the API server reads them
// (k8s.io/apimachinery labels.Parse and fields.ParseSelector): labels with =, ==, !=, in, notin,
// exists and !key; fields metadata.name and metadata.namespace with =, == and !=. Anything else
// parses to undefined, and the read goes to the cluster, which gives its own answer (or its 400).
import type { CachedObject } from './resource-cache.js';

type Requirement = (labels: Record<string, string>) => boolean;

/** A label key: an optional DNS-subdomain prefix (at most 253) and a name of at most 63. */
const KEY = /^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\/)?[a-z0-9A-Z]([-a-z0-9A-Z_.]{0,61}[a-z0-9A-Z])?$/;
const VALUE = /^([a-z0-9A-Z]([-a-z0-9A-Z_.]{0,61}[a-z0-9A-Z])?)?$/;
/** More requirements than this go to the cluster (each one is checked against every object). */
const MAX_REQUIREMENTS = 20;

/** A matcher of an object's labels, or undefined for a selector the cache does not read. */
export function parseLabelSelector(text: string | undefined): Requirement | undefined {
  if (text === undefined || text.trim() === '') return () => true;
  const requirements: Requirement[] = [];
  const parts = splitTopLevel(text);
  if (parts.length > MAX_REQUIREMENTS) return undefined;
  for (const part of parts) {
    const one = parseRequirement(part.trim());
    if (!one) return undefined;
    requirements.push(one);
  }
  return (labels) => requirements.every((r) => r(labels));
}

/** Splits at commas that are not inside the parentheses of a set. */
function splitTopLevel(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '(') depth++;
    else if (text[i] === ')') depth--;
    else if (text[i] === ',' && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts;
}

function parseRequirement(part: string): Requirement | undefined {
  const set = /^(\S+)\s+(in|notin)\s*\(([^()]*)\)$/.exec(part);
  if (set) {
    const [, key, op, list] = set;
    const values = list.split(',').map((v) => v.trim());
    if (!KEY.test(key) || !values.every((v) => VALUE.test(v))) return undefined;
    const wanted = new Set(values);
    return op === 'in'
      ? (labels) => Object.hasOwn(labels, key) && wanted.has(labels[key])
      : (labels) => !Object.hasOwn(labels, key) || !wanted.has(labels[key]);
  }
  const compare = /^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(part);
  if (compare) {
    const [, key, op, value] = compare;
    if (!KEY.test(key) || !VALUE.test(value)) return undefined;
    return op === '!='
      ? (labels) => !Object.hasOwn(labels, key) || labels[key] !== value
      : (labels) => Object.hasOwn(labels, key) && labels[key] === value;
  }
  const exists = /^(!?)\s*([^=!\s()]+)$/.exec(part);
  if (exists && KEY.test(exists[2])) {
    const key = exists[2];
    return exists[1] ? (labels) => !Object.hasOwn(labels, key) : (labels) => Object.hasOwn(labels, key);
  }
  return undefined;
}

/**
 * A matcher of metadata.name (and metadata.namespace, on namespaced resources), or undefined for any
 * other field selector, an escaped value, or spacing the API server refuses.
 */
export function parseFieldSelector(
  text: string | undefined,
  namespaced: boolean,
): ((o: CachedObject) => boolean) | undefined {
  if (text === undefined || text === '') return () => true;
  if (/[\\\s]/.test(text)) return undefined;
  const tests: Array<(o: CachedObject) => boolean> = [];
  for (const part of text.split(',')) {
    const match = /^(metadata\.name|metadata\.namespace)(==|=|!=)([^,]*)$/.exec(part);
    if (!match) return undefined;
    const [, field, op, value] = match;
    if (field === 'metadata.namespace' && !namespaced) return undefined;
    const read = field === 'metadata.name' ? (o: CachedObject) => o.name : (o: CachedObject) => o.namespace;
    tests.push(op === '!=' ? (o) => read(o) !== value : (o) => read(o) === value);
  }
  return (o) => tests.every((t) => t(o));
}
