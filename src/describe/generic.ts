// kubectl's generic describer, for every kind without a describer of its own (custom resources
// included): name, namespace, labels and annotations, then every other field of the object (its
// managed fields aside) as kubectl's printUnstructuredContent prints it (keys sorted, nested objects
// indented, field names turned into labels such as "API Version"), then the events.
import { describeEvents } from './events.js';
import { byteOrder, goValue, obj, printAnnotationsMultiline, printLabelsMultiline, str, type Json } from './format.js';
import { tabbed, type DescribeWriter } from './text.js';

const ACRONYMS = new Set(['API', 'URL', 'UID', 'OSB', 'GUID']);

/** The character class fatih/camelcase splits on: lower, upper, digit, other. */
function charClass(ch: string): number {
  if (/\p{Ll}/u.test(ch)) return 1;
  if (/\p{Lu}/u.test(ch)) return 2;
  if (/\p{Nd}/u.test(ch)) return 3;
  return 4;
}

/** github.com/fatih/camelcase Split: "apiVersion" → ["api", "Version"], "HTTPServer" → ["HTTP", "Server"]. */
export function camelcaseSplit(src: string): string[] {
  const runs: string[][] = [];
  let lastClass = 0;
  for (const ch of src) {
    const cls = charClass(ch);
    if (cls === lastClass && runs.length > 0) runs[runs.length - 1].push(ch);
    else runs.push([ch]);
    lastClass = cls;
  }
  for (let i = 0; i < runs.length - 1; i++) {
    if (charClass(runs[i][0]) === 2 && charClass(runs[i + 1][0]) === 1) {
      runs[i + 1].unshift(runs[i].pop()!);
    }
  }
  return runs.filter((r) => r.length > 0).map((r) => r.join(''));
}

/** x/text's cases.Title of one word: the first letter upper case, the others lower case ("IP" → "Ip"). */
function titleCase(word: string): string {
  const [first = '', ...rest] = [...word];
  return first.toUpperCase() + rest.join('').toLowerCase();
}

/** kubectl's smartLabelFor: "apiVersion" → "API Version"; names with other characters stay as they are. */
export function smartLabelFor(field: string): string {
  if ([...field].some((ch) => !/\p{L}/u.test(ch) && ch !== '-')) return field;
  const parts: string[] = [];
  for (const part of camelcaseSplit(field)) {
    if (part === '_') continue;
    if (ACRONYMS.has(part.toUpperCase())) parts.push(part.toUpperCase());
    else parts.push(titleCase(part));
  }
  return parts.join(' ');
}

const isMap = (v: unknown): v is Json => !!v && typeof v === 'object' && !Array.isArray(v);

/** kubectl's printUnstructuredContent. */
export function printUnstructuredContent(
  w: DescribeWriter,
  level: number,
  content: Json,
  skipPrefix: string,
  skip: ReadonlySet<string>,
): void {
  for (const field of Object.keys(content).sort(byteOrder)) {
    const value = content[field];
    const skipExpr = `${skipPrefix}.${field}`;
    if (skip.has(skipExpr)) continue;
    if (isMap(value)) {
      w.write(level, `${smartLabelFor(field)}:\n`);
      printUnstructuredContent(w, level + 1, value, skipExpr, skip);
    } else if (Array.isArray(value)) {
      w.write(level, `${smartLabelFor(field)}:\n`);
      for (const child of value) {
        if (isMap(child)) printUnstructuredContent(w, level + 1, child, skipExpr, skip);
        else w.write(level + 1, `${goValue(child)}\n`);
      }
    } else {
      w.write(level, `${smartLabelFor(field)}:\t${goValue(value)}\n`);
    }
  }
}

const SKIPPED = new Set([
  '.metadata.managedFields',
  '.metadata.name',
  '.metadata.namespace',
  '.metadata.labels',
  '.metadata.annotations',
]);

export function describeGeneric(object: Json, events: Json[]): string {
  return tabbed((w) => {
    const meta = obj(object.metadata);
    w.write(0, `Name:\t${str(meta.name)}\n`);
    w.write(0, `Namespace:\t${str(meta.namespace)}\n`);
    printLabelsMultiline(w, 'Labels', meta.labels);
    printAnnotationsMultiline(w, 'Annotations', meta.annotations);
    printUnstructuredContent(w, 0, object, '', SKIPPED);
    describeEvents(w, events);
  });
}
