// The formatting rules under kiteline's describe text (src/describe/): Go's text/tabwriter as
// kubectl configures it (expected outputs produced with Go's own tabwriter), kubectl's terminal
// escaping, Go's canonical quantities, HumanDuration, %v of JSON values, label selectors, and
// the generic describer's field labels and layout.
import t from 'tap';
import { formatColumns, tabbed, escapeTerminal } from '../../src/describe/text.js';
import { Quantity } from '../../src/cluster-access/quantity.js';
import { podRequestsAndLimits } from '../../src/describe/quantity.js';
import {
  goValue,
  humanDuration,
  printAnnotationsMultiline,
  selectorString,
  formatLabels,
} from '../../src/describe/format.js';
import { camelcaseSplit, describeGeneric, smartLabelFor } from '../../src/describe/generic.js';
import { describeEvents } from '../../src/describe/events.js';

t.test("Go's tabwriter (minwidth 0, padding 2, spaces)", async (t) => {
  const cases: Array<[string, string]> = [
    [
      'Name:\tweb\nNamespace:\tdefault\nLabels:\ta=b\n\tc=d\nAnnotations:\t<none>\n',
      'Name:         web\nNamespace:    default\nLabels:       a=b\n              c=d\nAnnotations:  <none>\n',
    ],
    ['A:\tx\nno tab here\nLonger key:\ty\n', 'A:  x\nno tab here\nLonger key:  y\n'],
    [
      'Conditions:\n  Type\tStatus\n  Ready \tTrue \n  PodScheduled \tTrue \n',
      'Conditions:\n  Type           Status\n  Ready          True \n  PodScheduled   True \n',
    ],
    ['a\tb\tc\naaaa\tbb\tc\nx\ty\n', 'a     b   c\naaaa  bb  c\nx     y\n'],
    ['é:\tx\nab:\ty\n', 'é:   x\nab:  y\n'],
    ['  Port:\thttp\t80/TCP\n  TargetPort:\t8080/TCP\n', '  Port:        http  80/TCP\n  TargetPort:  8080/TCP\n'],
  ];
  for (const [input, expected] of cases) t.equal(formatColumns(input), expected, JSON.stringify(input));

  const flushed = tabbed((w) => {
    w.write(0, 'Key:\tv\nLonger key:\tw\n');
    w.flush();
    w.write(1, 'Type\tReason\n');
    w.write(1, 'x\ty\n');
  });
  t.equal(flushed, 'Key:         v\nLonger key:  w\n  Type  Reason\n  x     y\n', 'a flush starts new column blocks');
});

t.test("kubectl's terminal escaping", async (t) => {
  t.equal(escapeTerminal('a\x1b[31mred\r'), 'a^[[31mred\\r');
  t.equal(
    tabbed((w) => w.write(0, 'Message:\t\x1b]0;title\x07\n')),
    'Message:  ^[]0;title\x07\n',
  );
});

t.test("Go's canonical quantities", async (t) => {
  const canonical: Array<[string, string]> = [
    ['1500m', '1500m'],
    ['2000m', '2'],
    ['1000', '1k'],
    ['1.5', '1500m'],
    ['1536Mi', '1536Mi'],
    ['1024Mi', '1Gi'],
    ['0.5Gi', '512Mi'],
    ['0.5Ki', '512'],
    ['128974848', '128974848'],
    ['1e3', '1e3'],
    ['0', '0'],
    ['267847642337', '267847642337'],
  ];
  for (const [input, expected] of canonical) t.equal(Quantity.parse(input).toString(), expected, input);
  t.equal(Quantity.parse('100m').add(Quantity.parse('100m')).toString(), '200m');
  t.equal(Quantity.parse('16Mi').add(Quantity.parse('16Mi')).toString(), '32Mi');
  t.equal(
    Quantity.zero().add(Quantity.parse('64Mi')).toString(),
    '64Mi',
    'a zero sum takes the format of what is added',
  );
  t.equal(Quantity.parse('100m').milliValue(), 100);
  t.equal(Quantity.parse('1500m').value(), 2, 'Value() rounds up');
  const pod = {
    spec: {
      containers: [
        { resources: { requests: { cpu: '100m' } } },
        { resources: { requests: { cpu: '200m' }, limits: { memory: '1Gi' } } },
      ],
      initContainers: [{ resources: { requests: { cpu: '500m' } } }],
      overhead: { cpu: '10m', memory: '1Mi' },
    },
  };
  const { requests, limits } = podRequestsAndLimits(pod);
  t.equal(requests.get('cpu')!.toString(), '510m', 'init containers are a minimum, overhead is added');
  t.equal(limits.get('memory')!.toString(), '1025Mi', 'overhead is added to limits that are set');
});

t.test('HumanDuration, %v and selectors', async (t) => {
  const s = 1000;
  t.same([5 * s, 119 * s, 130 * s, 600 * s, 7200 * s, 7260 * s, 50 * 3600 * s, -5 * s, -1 * s].map(humanDuration), [
    '5s',
    '119s',
    '2m10s',
    '10m',
    '120m',
    '121m',
    '2d2h',
    '<invalid>',
    '0s',
  ]);
  t.same([0.5, 1e21, 0.00001, 3, true, null, ['a', 'b'], 'x'].map(goValue), [
    '0.5',
    '1e+21',
    '1e-05',
    '3',
    'true',
    '<nil>',
    '[a b]',
    'x',
  ]);
  t.equal(
    selectorString({
      matchLabels: { z: '1', app: 'web' },
      matchExpressions: [
        { key: 'tier', operator: 'In', values: ['front', 'edge'] },
        { key: 'gone', operator: 'DoesNotExist' },
      ],
    }),
    'app=web,gone,tier in (edge,front),z=1'.replace('gone', '!gone'),
  );
  t.equal(selectorString(undefined), '');
  t.equal(formatLabels({}), '<none>');
  t.equal(formatLabels({ b: '2', a: '1' }), 'a=1,b=2');
});

t.test('annotations: sorted, last-applied skipped, long values cut', async (t) => {
  const text = tabbed((w) =>
    printAnnotationsMultiline(w, 'Annotations', {
      'kubectl.kubernetes.io/last-applied-configuration': '{}',
      b: 'two\nlines\n',
      a: 'y'.repeat(200),
    }),
  );
  t.equal(
    text,
    `Annotations:  a:\n                ${'y'.repeat(138)}...\n` +
      `              b:\n                two\n                lines\n`,
  );
});

t.test("the generic describer's labels and layout", async (t) => {
  t.same(camelcaseSplit('apiVersion'), ['api', 'Version']);
  t.same(camelcaseSplit('HTTPServer'), ['HTTP', 'Server']);
  t.equal(smartLabelFor('apiVersion'), 'API Version');
  t.equal(smartLabelFor('creationTimestamp'), 'Creation Timestamp');
  t.equal(smartLabelFor('uid'), 'UID');
  t.equal(smartLabelFor('fieldsV1'), 'fieldsV1', 'names with digits stay as they are');
  t.equal(smartLabelFor('f:spec'), 'f:spec');
  const text = describeGeneric(
    {
      apiVersion: 'x.io/v1',
      kind: 'Widget',
      metadata: { name: 'w', namespace: 'n', uid: 'u-1' },
      spec: { list: [{ a: 1 }, 'plain'], on: true, ratio: 0.5 },
    },
    [],
  );
  t.equal(
    text,
    [
      'Name:         w',
      'Namespace:    n',
      'Labels:       <none>',
      'Annotations:  <none>',
      'API Version:  x.io/v1',
      'Kind:         Widget',
      'Metadata:',
      '  UID:  u-1',
      'Spec:',
      '  List:',
      '    A:  1',
      '    plain',
      '  On:     true',
      '  Ratio:  0.5',
      'Events:   <none>',
      '',
    ].join('\n'),
  );
});

t.test(
  'events: oldest first (no last timestamp: first), counts, eventTime for new-style events, a flush before the table',
  async (t) => {
    const now = Date.now();
    const iso = (agoSeconds: number) => new Date(now - agoSeconds * 1000).toISOString();
    const text = tabbed((w) => {
      w.write(0, 'A much longer key:\tvalue\n');
      describeEvents(w, [
        {
          type: 'Warning',
          reason: 'BackOff',
          count: 3,
          firstTimestamp: iso(300),
          lastTimestamp: iso(10),
          source: { component: 'kubelet' },
          message: ' restarting \n',
        },
        {
          type: 'Normal',
          reason: 'Scheduled',
          eventTime: iso(400),
          reportingComponent: 'default-scheduler',
          message: 'assigned',
        },
      ]);
    });
    t.equal(
      text,
      [
        'A much longer key:  value',
        'Events:',
        '  Type     Reason     Age               From               Message',
        '  ----     ------     ----              ----               -------',
        '  Normal   Scheduled  6m40s             default-scheduler  assigned',
        '  Warning  BackOff    10s (x3 over 5m)  kubelet            restarting',
        '',
      ].join('\n'),
    );
  },
);
