// Compares a command's output with what a README shows for it, by structure: the same JSON shape
// and values, or the same table, except for what differs on every run (ids, uids, keys, times,
// ages, ports, the random suffixes of generated names), which must only be there. What the README
// shows as prose is checked only when it states a count ("two ReplicaSets: ..." of a JSON list), or
// when the command printed one plain line (then that line must be what the README shows).

export type Comparison =
  /** Both sides normalized: equal when the output is what the README shows. */
  | { kind: 'compared'; actual: unknown; expected: unknown }
  /** Prose the comparison cannot check (it is reported, not failed). */
  | { kind: 'prose'; text: string };

/** Keys whose values change on every run. */
const VOLATILE_KEY = /^(id|uid|key|resourceVersion)$|(Id|At|Time|Timestamp)$/;
const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** kubectl's AGE column: 5s, 3m, 2m10s, 4h, 1d. */
const AGE = /^\d+[smhd](\d+[smh])?$/;
/** Suffixes Kubernetes generates: a pod-template hash and a random name suffix (its alphabet). */
const GENERATED_SUFFIX = /-[bcdfghjklmnpqrstvwxz2-9]{8,10}(?=-|$)|-[bcdfghjklmnpqrstvwxz2-9]{5}$/g;
const COUNT_WORDS = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten'];
const COUNT = new RegExp(`^(\\d+|${COUNT_WORDS.join('|')})\\s+[A-Za-z]`, 'i');

function normalizeText(value: string): string {
  if (ISO_TIME.test(value) || UUID.test(value)) return '<varies>';
  return value.replace(/(\/\/[\w.-]+):\d+/g, '$1:<port>').replace(GENERATED_SUFFIX, '-<generated>');
}

/** The JSON value with what varies between runs replaced by a placeholder. */
export function normalizeJson(value: unknown, key = ''): unknown {
  if (VOLATILE_KEY.test(key) && value !== null && typeof value !== 'object') return '<varies>';
  if (typeof value === 'string') return normalizeText(value);
  if (Array.isArray(value)) return value.map((item) => normalizeJson(item));
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, normalizeJson(v, k)]));
  return value;
}

/** The JSON value at the start of the text ("[] on a fresh control plane" gives []), if any. */
function leadingJson(text: string): { found: true; value: unknown } | { found: false } {
  try {
    return { found: true, value: JSON.parse(text) };
  } catch {
    /* maybe JSON followed by prose */
  }
  if (!/^[[{]/.test(text)) return { found: false };
  for (let end = text.length - 1; end > 0; end--) {
    if (text[end] !== ']' && text[end] !== '}') continue;
    try {
      return { found: true, value: JSON.parse(text.slice(0, end + 1)) };
    } catch {
      /* a shorter prefix, then */
    }
  }
  return { found: false };
}

function parsedOutput(output: string): unknown {
  try {
    return JSON.parse(output);
  } catch {
    return output;
  }
}

/** Table lines as tokens, with ages and generated suffixes normalized. */
function tableTokens(lines: string[]): string[][] {
  return lines.map((line) =>
    line
      .trim()
      .split(/\s+/)
      .map((token) => (AGE.test(token) ? '<age>' : normalizeText(token))),
  );
}

/** How the output compares with the lines the README shows for its command. */
export function compareShown(shown: string[], output: string): Comparison {
  const text = shown.join('\n').trim();
  const json = leadingJson(text);
  if (json.found)
    return {
      kind: 'compared',
      actual: normalizeJson(parsedOutput(output.trim())),
      expected: normalizeJson(json.value),
    };
  if (shown.length === 1) {
    const count = COUNT.exec(text);
    if (!count) {
      // A one-line plain answer (kubectl's "hello from the pod") is compared as it is shown.
      const plain = output.trim();
      const oneLine = plain !== '' && !plain.includes('\n') && parsedOutput(plain) === plain;
      return oneLine
        ? { kind: 'compared', actual: tableTokens([plain]), expected: tableTokens([text]) }
        : { kind: 'prose', text };
    }
    const expected = /^\d+$/.test(count[1]) ? Number(count[1]) : COUNT_WORDS.indexOf(count[1].toLowerCase());
    const list = parsedOutput(output.trim());
    return {
      kind: 'compared',
      actual: Array.isArray(list) ? { items: list.length } : list,
      expected: { items: expected },
    };
  }
  const outputLines = output
    .trim()
    .split('\n')
    .filter((line) => line.trim() !== '');
  return { kind: 'compared', actual: tableTokens(outputLines), expected: tableTokens(shown) };
}
