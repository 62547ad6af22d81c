// Go's and kubectl's small formatting rules the describers share: times (RFC 1123 with numeric
// zone), ages (apimachinery's HumanDuration), `%v` of JSON values, label sets and selectors, and
// kubectl's multi-line printers of labels, annotations, taints, tolerations and pod names.
import type { DescribeWriter } from './text.js';

// ---- times ----------------------------------------------------------------------------------

const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const two = (n: number) => String(n).padStart(2, '0');

/**
 * Go's time.RFC1123Z ("Mon, 02 Jan 2006 15:04:05 -0700") in this process's time zone, as kubectl
 * prints times in its own. An absent time is Go's zero time, as kubectl prints it.
 */
export function rfc1123z(value: unknown): string {
  const ms = typeof value === 'string' && value ? Date.parse(value) : NaN;
  if (Number.isNaN(ms)) return 'Mon, 01 Jan 0001 00:00:00 +0000';
  const d = new Date(ms);
  const offset = -d.getTimezoneOffset();
  const zone = `${offset < 0 ? '-' : '+'}${two(Math.floor(Math.abs(offset) / 60))}${two(Math.abs(offset) % 60)}`;
  const time = `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
  return `${DAYS[d.getDay()]}, ${two(d.getDate())} ${MONTHS[d.getMonth()]} ${d.getFullYear()} ${time} ${zone}`;
}

/** apimachinery's duration.HumanDuration. */
export function humanDuration(ms: number): string {
  const seconds = Math.trunc(ms / 1000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.trunc(ms / 60_000);
  if (minutes < 10) {
    const s = seconds % 60;
    return s === 0 ? `${minutes}m` : `${minutes}m${s}s`;
  }
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.trunc(ms / 3_600_000);
  if (hours < 8) {
    const m = minutes % 60;
    return m === 0 ? `${hours}h` : `${hours}h${m}m`;
  }
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8) {
    const h = hours % 24;
    return h === 0 ? `${Math.trunc(hours / 24)}d` : `${Math.trunc(hours / 24)}d${h}h`;
  }
  if (hours < 24 * 365 * 2) return `${Math.trunc(hours / 24)}d`;
  if (hours < 24 * 365 * 8) {
    const dy = Math.trunc(hours / 24) % 365;
    return dy === 0 ? `${Math.trunc(hours / 24 / 365)}y` : `${Math.trunc(hours / 24 / 365)}y${dy}d`;
  }
  return `${Math.trunc(hours / 24 / 365)}y`;
}

/** kubectl's translateTimestampSince: the age of a timestamp, "<unknown>" for none. */
export function since(timestamp: unknown): string {
  const ms = typeof timestamp === 'string' && timestamp ? Date.parse(timestamp) : NaN;
  if (Number.isNaN(ms)) return '<unknown>';
  return humanDuration(Date.now() - ms);
}

// ---- values ---------------------------------------------------------------------------------

/** Go's %v of a float64 (shortest form; exponent below 1e-4 and from 1e21). */
function goFloat(n: number): string {
  if (Number.isInteger(n) && Math.abs(n) < 1e21) return String(n);
  if (n === 0 || (Math.abs(n) >= 1e-4 && Math.abs(n) < 1e21)) return String(n);
  const [mantissa, exponent] = n.toExponential().split('e') as [string, string];
  const sign = exponent.startsWith('-') ? '-' : '+';
  return `${mantissa}e${sign}${exponent.replace(/^[-+]/, '').padStart(2, '0')}`;
}

/** Go's %v of a value decoded from JSON (unstructured content): null is "<nil>", arrays "[a b]". */
export function goValue(value: unknown): string {
  if (value === null || value === undefined) return '<nil>';
  if (typeof value === 'number') return goFloat(value);
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return `[${value.map(goValue).join(' ')}]`;
  const entries = Object.keys(value)
    .sort()
    .map((k) => `${k}:${goValue((value as Record<string, unknown>)[k])}`);
  return `map[${entries.join(' ')}]`;
}

/** Go's %v of a []string: "[a b]". */
export function goList(values: unknown): string {
  return `[${(Array.isArray(values) ? values : []).map(goValue).join(' ')}]`;
}

/** kubectl's printBool: True / False. */
export function printBool(value: unknown): string {
  return value === true ? 'True' : 'False';
}

/** kubectl's printBoolPtr: True / False / <unset>. */
export function printBoolPtr(value: unknown): string {
  return typeof value === 'boolean' ? printBool(value) : '<unset>';
}

export function stringOrNone(value: unknown): string {
  return typeof value === 'string' && value.length > 0 ? value : '<none>';
}

/** A string member, or "" (Go's zero value). */
export function str(value: unknown): string {
  return typeof value === 'string' ? value : value === undefined || value === null ? '' : goValue(value);
}

/** A number member, or 0 (Go's zero value). */
export function num(value: unknown): number {
  return typeof value === 'number' ? value : 0;
}

/** Plain objects of a JSON document, typed loosely (the describers read many shapes). */
export type Json = Record<string, any>;

export function obj(value: unknown): Json {
  return value && typeof value === 'object' && !Array.isArray(value) ? value : {};
}

export function arr(value: unknown): Json[] {
  return Array.isArray(value) ? (value as Json[]) : [];
}

export function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.map(str) : [];
}

/** Go's byte-wise string order (sort.Strings). */
export function byteOrder(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

// ---- labels and selectors -------------------------------------------------------------------

/** labels.FormatLabels: "a=b,c=d" sorted, or "<none>". */
export function formatLabels(labels: unknown): string {
  const text = Object.entries(obj(labels))
    .map(([k, v]) => `${k}=${str(v)}`)
    .sort(byteOrder)
    .join(',');
  return text || '<none>';
}

/**
 * metav1.LabelSelectorAsSelector(...).String(): requirements sorted by key, set values sorted.
 * An absent selector selects nothing and an empty one everything: both print "".
 */
export function selectorString(selector: unknown): string {
  const s = obj(selector);
  const reqs: Array<{ key: string; text: string }> = [];
  for (const [key, value] of Object.entries(obj(s.matchLabels))) reqs.push({ key, text: `${key}=${str(value)}` });
  for (const e of arr(s.matchExpressions)) {
    const key = str(e.key);
    const values = strings(e.values);
    const set = values.length === 1 ? values[0] : [...values].sort(byteOrder).join(',');
    switch (e.operator) {
      case 'In':
        reqs.push({ key, text: `${key} in (${set})` });
        break;
      case 'NotIn':
        reqs.push({ key, text: `${key} notin (${set})` });
        break;
      case 'Exists':
        reqs.push({ key, text: key });
        break;
      case 'DoesNotExist':
        reqs.push({ key, text: `!${key}` });
        break;
    }
  }
  return reqs
    .sort((a, b) => byteOrder(a.key, b.key))
    .map((r) => r.text)
    .join(',');
}

/** metav1.FormatLabelSelector: the selector's string, or "<none>". */
export function formatLabelSelector(selector: unknown): string {
  return selectorString(selector) || '<none>';
}

// ---- kubectl's multi-line printers ----------------------------------------------------------

/** kubectl's printLabelsMultilineWithIndent. */
export function printLabelsMultiline(
  w: DescribeWriter,
  title: string,
  labels: unknown,
  initialIndent = '',
  innerIndent = '\t',
): void {
  w.write(0, `${initialIndent}${title}:${innerIndent}`);
  const map = obj(labels);
  const keys = Object.keys(map).sort(byteOrder);
  if (keys.length === 0) {
    w.line('<none>');
    return;
  }
  keys.forEach((key, i) => {
    if (i !== 0) {
      w.write(0, initialIndent);
      w.write(0, innerIndent);
    }
    w.write(0, `${key}=${str(map[key])}\n`);
  });
}

const MAX_ANNOTATION_LEN = 140;
const SKIPPED_ANNOTATIONS = new Set(['kubectl.kubernetes.io/last-applied-configuration']);

/** Go's s[:n] on a string counts bytes; kubectl cuts long annotation lines that way. */
function byteSlice(s: string, n: number): string {
  return Buffer.from(s, 'utf8').subarray(0, n).toString('utf8');
}
const byteLength = (s: string) => Buffer.byteLength(s, 'utf8');

function shorten(s: string, max: number): string {
  return byteLength(s) > max ? `${byteSlice(s, max)}...` : s;
}

/** kubectl's printAnnotationsMultiline (last-applied-configuration skipped, long values cut). */
export function printAnnotationsMultiline(w: DescribeWriter, title: string, annotations: unknown): void {
  w.write(0, `${title}:\t`);
  const map = obj(annotations);
  const keys = Object.keys(map)
    .filter((k) => !SKIPPED_ANNOTATIONS.has(k))
    .sort(byteOrder);
  if (keys.length === 0) {
    w.line('<none>');
    return;
  }
  const indent = '\t';
  keys.forEach((key, i) => {
    if (i !== 0) w.write(0, indent);
    const value = str(map[key]).replace(/\n$/, '');
    if (byteLength(value) + byteLength(key) + 2 > MAX_ANNOTATION_LEN || value.includes('\n')) {
      w.write(0, `${key}:\n`);
      for (const s of value.split('\n')) w.write(0, `${indent}  ${shorten(s, MAX_ANNOTATION_LEN - 2)}\n`);
    } else {
      w.write(0, `${key}: ${value}\n`);
    }
  });
}

/** core/v1 Taint.ToString. */
export function taintString(taint: Json): string {
  const key = str(taint.key);
  const value = str(taint.value);
  const effect = str(taint.effect);
  if (!effect) return value ? `${key}=${value}:` : key;
  return value ? `${key}=${value}:${effect}` : `${key}:${effect}`;
}

/** kubectl's printTaintsMultilineWithIndent (sorted by effect, then key). */
export function printTaintsMultiline(w: DescribeWriter, title: string, taints: unknown): void {
  w.write(0, `${title}:\t`);
  const list = arr(taints);
  if (list.length === 0) {
    w.line('<none>');
    return;
  }
  const keyOf = (t: Json) => `${str(t.effect)},${str(t.key)}`;
  [...list]
    .sort((a, b) => byteOrder(keyOf(a), keyOf(b)))
    .forEach((taint, i) => {
      if (i !== 0) w.write(0, '\t');
      w.write(0, `${taintString(taint)}\n`);
    });
}

/** kubectl's printPodsMultilineWithIndent (pod names, sorted). */
export function printPodsMultiline(w: DescribeWriter, title: string, pods: Json[]): void {
  w.write(0, `${title}:\t`);
  if (pods.length === 0) {
    w.line('<none>');
    return;
  }
  pods
    .map((p) => str(p.metadata?.name))
    .sort(byteOrder)
    .forEach((name, i) => {
      if (i !== 0) w.write(0, '\t');
      w.write(0, `${name}\n`);
    });
}

/** kubectl's printTolerationsMultilineWithIndent (sorted by key). */
export function printTolerationsMultiline(w: DescribeWriter, title: string, tolerations: unknown): void {
  w.write(0, `${title}:\t`);
  const list = arr(tolerations);
  if (list.length === 0) {
    w.line('<none>');
    return;
  }
  [...list]
    .sort((a, b) => byteOrder(str(a.key), str(b.key)))
    .forEach((t, i) => {
      if (i !== 0) w.write(0, '\t');
      const key = str(t.key);
      const value = str(t.value);
      const effect = str(t.effect);
      let text = key;
      if (value) text += `=${value}`;
      if (effect) text += `:${effect}`;
      if (t.operator === 'Exists' && !value) text += key || effect ? ' op=Exists' : 'op=Exists';
      if (typeof t.tolerationSeconds === 'number') text += ` for ${t.tolerationSeconds}s`;
      w.write(0, `${text}\n`);
    });
}

/** kubectl's printController: "Kind/name" of the controller owner, or "". */
export function controllerOf(object: Json): string {
  const ref = arr(object.metadata?.ownerReferences).find((r) => r.controller === true);
  return ref ? `${str(ref.kind)}/${str(ref.name)}` : '';
}
