// What a Kubernetes API request is, read from its method, path and query exactly as the API
// server reads it: a port of k8s.io/apiserver/pkg/endpoints/request/requestinfo.go (1.20),
// RequestInfoFactory{APIPrefixes: api, apis; GrouplessAPIPrefixes: api}. kiteline authorizes with
// the same reading the cluster will act on, so a request cannot be checked as one thing and served
// as another. Pure; the cases of requestinfo_test.go are ported in test/unit/request-info.test.ts.

export interface RequestInfo {
  /** A request for an API resource or subresource (else a non-resource URL such as /version). */
  isResourceRequest: boolean;
  /** The decoded URL path. */
  path: string;
  /**
   * The Kubernetes verb (get, list, watch, create, update, patch, delete, deletecollection, proxy),
   * "" for a method no verb belongs to; for non-resource requests the lower-case HTTP method.
   */
  verb: string;
  apiPrefix: string;
  apiGroup: string;
  apiVersion: string;
  /** "" for cluster-scoped and all-namespace requests. */
  namespace: string;
  resource: string;
  subresource: string;
  name: string;
  /** The path parts from the resource on: resource/name/subresource/... */
  parts: string[];
}

const API_PREFIXES: ReadonlySet<string> = new Set(['api', 'apis']);
const GROUPLESS_API_PREFIXES: ReadonlySet<string> = new Set(['api']);
/** Path words that are verbs (/api/v1/watch/pods, /api/v1/proxy/...). */
const SPECIAL_VERBS: ReadonlySet<string> = new Set(['proxy', 'watch']);
/** Special verbs after which no subresource is read. */
const SPECIAL_VERBS_NO_SUBRESOURCES: ReadonlySet<string> = new Set(['proxy']);
/** Subresources of a namespace: /api/v1/namespaces/<ns>/status is not a resource "status" in <ns>. */
const NAMESPACE_SUBRESOURCES: ReadonlySet<string> = new Set(['status', 'finalize']);

const METHOD_VERBS: Readonly<Record<string, string>> = {
  POST: 'create',
  GET: 'get',
  HEAD: 'get',
  PUT: 'update',
  PATCH: 'patch',
  DELETE: 'delete',
};

/** Names that may not be path segments (apimachinery's path.IsValidPathSegmentName). */
const NAME_MAY_NOT_BE: ReadonlySet<string> = new Set(['.', '..']);
const NAME_MAY_NOT_CONTAIN = ['/', '%'];

/**
 * The request info of `method` on `path` (decoded, as Go's URL.Path) with the raw query string
 * (without "?"). Mirrors NewRequestInfo, including its "error" case (a special verb with nothing
 * after it), which the API server also treats as a resource request without a resource.
 */
export function parseRequestInfo(method: string, path: string, query: string): RequestInfo {
  const info: RequestInfo = {
    isResourceRequest: false,
    path,
    verb: method.toLowerCase(),
    apiPrefix: '',
    apiGroup: '',
    apiVersion: '',
    namespace: '',
    resource: '',
    subresource: '',
    name: '',
    parts: [],
  };
  let parts = splitPath(path);
  if (parts.length < 3 || !API_PREFIXES.has(parts[0])) return info;
  info.apiPrefix = parts[0]!;
  parts = parts.slice(1);
  if (!GROUPLESS_API_PREFIXES.has(info.apiPrefix)) {
    // One part (the prefix) is consumed: "do we have four parts?"
    if (parts.length < 3) return info;
    info.apiGroup = parts[0]!;
    parts = parts.slice(1);
  }
  info.isResourceRequest = true;
  info.apiVersion = parts[0]!;
  parts = parts.slice(1);

  if (SPECIAL_VERBS.has(parts[0])) {
    if (parts.length < 2) return info; // "unable to determine kind and namespace"
    info.verb = parts[0]!;
    parts = parts.slice(1);
  } else {
    info.verb = METHOD_VERBS[method] ?? '';
  }

  // /namespaces/{namespace}/{kind}/*: parts become relative to the kind.
  if (parts[0] === 'namespaces') {
    if (parts.length > 1) {
      info.namespace = parts[1]!;
      if (parts.length > 2 && !NAMESPACE_SUBRESOURCES.has(parts[2])) parts = parts.slice(2);
    }
  }
  info.parts = parts;

  // resource/name/subresource/other/parts/not/interpreted
  if (parts.length >= 3 && !SPECIAL_VERBS_NO_SUBRESOURCES.has(info.verb)) info.subresource = parts[2]!;
  if (parts.length >= 2) info.name = parts[1]!;
  if (parts.length >= 1) info.resource = parts[0]!;

  // No name and a "get": a list or a watch, as the list options say.
  if (info.name === '' && info.verb === 'get') {
    const options = listOptions(query);
    info.verb = options.watch ? 'watch' : 'list';
    if (options.nameFromFieldSelector !== undefined && isValidPathSegmentName(options.nameFromFieldSelector)) {
      info.name = options.nameFromFieldSelector;
    }
  }
  // No name and a "delete": the whole collection.
  if (info.name === '' && info.verb === 'delete') info.verb = 'deletecollection';
  return info;
}

/** Go's strings.Split(strings.Trim(path, "/"), "/"), with no parts for an empty path. */
function splitPath(path: string): string[] {
  const trimmed = path.replace(/^\/+|\/+$/g, '');
  return trimmed === '' ? [] : trimmed.split('/');
}

interface ListOptions {
  watch: boolean;
  /** metadata.name from an exact-match field selector, when the options decoded without error. */
  nameFromFieldSelector: string | undefined;
}

/**
 * The parts of metainternalversion.ListOptions that decide the verb and name. A bool parameter is
 * true unless absent, "0" or "false" (any case), read from its first value; that holds whether or
 * not the options decode. When decoding fails (a malformed fieldSelector, limit or timeoutSeconds),
 * the API server keeps the watch flag but takes no name from the field selector.
 * Not ported: labelSelector's grammar; a malformed labelSelector is refused by the API server
 * (400) and the name only ever names what a list or watch reads.
 */
function listOptions(query: string): ListOptions {
  const params = new URLSearchParams(query);
  const watch = params.get('watch');
  const options: ListOptions = {
    watch: watch !== null && watch !== '0' && watch.toLowerCase() !== 'false',
    nameFromFieldSelector: undefined,
  };
  for (const integer of ['limit', 'timeoutSeconds']) {
    const value = params.get(integer);
    if (value !== null && !isGoInt64(value)) return options;
  }
  const fieldSelector = params.get('fieldSelector');
  if (fieldSelector === null) return options;
  const terms = parseFieldSelector(fieldSelector);
  if (terms === undefined) return options;
  options.nameFromFieldSelector = terms.find((term) => term.op !== '!=' && term.field === 'metadata.name')?.value;
  return options;
}

/** strconv.ParseInt(value, 10, 64) succeeds. */
function isGoInt64(value: string): boolean {
  if (!/^[+-]?\d+$/.test(value)) return false;
  const n = BigInt(value);
  return n >= -(2n ** 63n) && n < 2n ** 63n;
}

interface FieldTerm {
  field: string;
  op: '=' | '==' | '!=';
  value: string;
}

/**
 * fields.ParseSelector: comma-separated terms (a backslash escapes the next character), each
 * "field<op>value" split at the first operator, terms sorted; undefined when it does not parse.
 * RequiresExactMatch returns the first matching "="/"==" term of the sorted list.
 */
function parseFieldSelector(selector: string): FieldTerm[] | undefined {
  const terms: FieldTerm[] = [];
  for (const part of splitTerms(selector).sort()) {
    if (part === '') continue;
    const term = splitTerm(part);
    if (!term) return undefined;
    const value = unescapeValue(term.value);
    if (value === undefined) return undefined;
    terms.push({ ...term, value });
  }
  return terms;
}

function splitTerms(selector: string): string[] {
  if (selector === '') return [];
  const terms: string[] = [];
  let start = 0;
  let inSlash = false;
  for (let i = 0; i < selector.length; i++) {
    const c = selector[i];
    if (inSlash) inSlash = false;
    else if (c === '\\') inSlash = true;
    else if (c === ',') {
      terms.push(selector.slice(start, i));
      start = i + 1;
    }
  }
  terms.push(selector.slice(start));
  return terms;
}

const TERM_OPERATORS = ['!=', '==', '='] as const;

function splitTerm(term: string): FieldTerm | undefined {
  for (let i = 0; i < term.length; i++) {
    for (const op of TERM_OPERATORS) {
      if (term.startsWith(op, i)) return { field: term.slice(0, i), op, value: term.slice(i + op.length) };
    }
  }
  return undefined;
}

/** fields.UnescapeValue: only \\, \, and \= are escapes; anything else after a backslash fails. */
function unescapeValue(value: string): string | undefined {
  if (!/[\\,=]/.test(value)) return value;
  let out = '';
  let inSlash = false;
  for (const c of value) {
    if (inSlash) {
      if (c !== '\\' && c !== ',' && c !== '=') return undefined;
      out += c;
      inSlash = false;
    } else if (c === '\\') {
      inSlash = true;
    } else {
      if (c === ',' || c === '=') return undefined; // unescaped: not allowed in a value
      out += c;
    }
  }
  return inSlash ? undefined : out;
}

/** apimachinery's path.IsValidPathSegmentName. */
function isValidPathSegmentName(name: string): boolean {
  return !NAME_MAY_NOT_BE.has(name) && !NAME_MAY_NOT_CONTAIN.some((bad) => name.includes(bad));
}
