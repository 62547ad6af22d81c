// The namespace limit on a caller's PromQL (src/monitoring/promql.ts): every vector selector of the
// printed query carries the matcher, whatever comments, strings or spacing the caller wrote; what
// the printer does not know is a 400; Kite's series helpers escape what they put in a query.
import { parser } from '@prometheus-io/lezer-promql';
import t, { type Test } from 'tap';
import { HttpError } from '../../src/errors.js';
import { limitToNamespaces, namespaceMatcher, promqlString, regexLiteral } from '../../src/monitoring/promql.js';
import { frontFilled } from '../../src/monitoring/usage.js';

const NS = ['shop', 'shop-2'];
const MATCHER = 'namespace=~"shop|shop-2"';

/** Each vector selector of a query, as text (parsed again, the way the printer's output is read). */
function selectors(query: string): string[] {
  const out: string[] = [];
  const tree = parser.parse(query);
  tree.iterate({
    enter(node) {
      if (node.type.isError) throw new Error(`the printed query does not parse: ${query}`);
      if (node.name === 'VectorSelector') out.push(query.slice(node.from, node.to));
    },
  });
  return out;
}

async function refused(t: Test, query: string, message: RegExp): Promise<void> {
  try {
    await limitToNamespaces(query, NS);
    t.fail(`${JSON.stringify(query.slice(0, 60))}: refused`);
  } catch (err) {
    t.ok(err instanceof HttpError && err.status === 400, `${JSON.stringify(query.slice(0, 60))}: 400`);
    t.match((err as Error).message, message);
  }
}

t.test('every selector gets the matcher, wherever it is', async (t) => {
  const queries = [
    'up',
    '{__name__=~".+"}',
    'foo{namespace="other"}',
    'sum by (pod) (rate(container_cpu_usage_seconds_total{container!=""}[5m]))',
    'a / on(x) group_left(y) b offset 1h',
    'a + b[5m:1m] @ end()',
    'histogram_quantile(0.9, sum by (le) (rate(h_bucket[5m])))',
    'topk(3, count_values("v", a)) or vector(1) unless absent(b)',
    'label_replace(up, "namespace", "other", "", "")',
    'foo # }{namespace="other"}\n+ bar',
    'foo{a="x\\"} or bar{"}',
    "foo{a='x\\'}'} and bar",
    'foo{a=`x"}`} * on() group_right () baz',
    '-foo offset 5m',
    'max_over_time(rate(foo[1m])[10m:30s])',
    '(a > bool b) == bool c',
    'foo{"utf8.label"="v", "metric.name"}',
    'scalar(a) * 2 ^ 3 % 4 - 1',
    'a atan2 b',
  ];
  for (const query of queries) {
    const printed = await limitToNamespaces(query, NS);
    const found = selectors(printed);
    t.ok(found.length > 0, `${query}: selectors in ${printed}`);
    t.ok(
      found.every((s) => s.endsWith(`, ${MATCHER}}`) || s.endsWith(`{${MATCHER}}`)),
      `${JSON.stringify(query)} → ${printed}`,
    );
  }
});

t.test('printed as Go reads it: modifiers on the last operand, operands parenthesised', async (t) => {
  t.equal(await limitToNamespaces('a + b offset 1m', NS), `(a{${MATCHER}}) + (b{${MATCHER}} offset 1m)`);
  t.equal(await limitToNamespaces('-a[5m] @ 100', NS), `-(a{${MATCHER}}[5m] @ 100)`);
  t.equal(await limitToNamespaces('sum(rate(a[5m])) by (x)', NS), `sum by (x) (rate(a{${MATCHER}}[5m]))`);
  t.equal(await limitToNamespaces('foo offset -5m', NS), `foo{${MATCHER}} offset -5m`);
  t.equal(await limitToNamespaces('1e-3 * time()', NS), '(1e-3) * (time())', 'no selector: nothing added');
  t.equal(await limitToNamespaces('foo # a comment', NS), `foo{${MATCHER}}`, 'comments are dropped');
  t.equal(
    await limitToNamespaces('a > bool on (x) group_left b', NS),
    `(a{${MATCHER}}) > bool on (x) group_left (b{${MATCHER}})`,
  );
});

t.test('what the printer does not know, or a broken query, is a 400', async (t) => {
  await refused(t, 'info(up)', /info\(\) is not allowed/);
  await refused(t, 'up{', /invalid PromQL/);
  await refused(t, 'foo{a="unterminated', /invalid/);
  await refused(t, 'foo{a="x\n"}', /invalid/);
  await refused(t, 'no_such_function(up)', /invalid PromQL/);
  await refused(t, 'sum(', /invalid PromQL/);
  await refused(t, 'x'.repeat(16_385), /at most 16384 characters/);
  await refused(t, `${'('.repeat(300)}up${')'.repeat(300)}`, /nested deeper than 200/);
});

t.test('values written into queries', async (t) => {
  t.equal(promqlString('a"b\\c\nd'), '"a\\"b\\\\c\\nd"');
  t.equal(regexLiteral('web.1+(x)|[y]{2}^$*?\\'), 'web\\.1\\+\\(x\\)\\|\\[y\\]\\{2\\}\\^\\$\\*\\?\\\\');
  t.equal(namespaceMatcher(['a.b']), 'namespace=~"a\\\\.b"');
  t.throws(() => namespaceMatcher([]), /at least one/);
});

t.test("Kite's front fill of a pod's series", async (t) => {
  const range = { start: 0, end: 600_000, stepSeconds: 60 };
  const late = [{ timestamp: new Date(300_000).toISOString(), value: 5 }];
  const filled = frontFilled(late, range);
  t.same(
    filled.map((p) => [Date.parse(p.timestamp) / 1000, p.value]),
    [
      [60, 0],
      [120, 0],
      [180, 0],
      [240, 0],
      [300, 5],
    ],
  );
  t.same(frontFilled([], range), [], 'no series: nothing filled');
  const early = [{ timestamp: new Date(30_000).toISOString(), value: 1 }];
  t.same(frontFilled(early, range), early, 'a series that starts within a step: as it is');
});
