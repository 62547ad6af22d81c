// The MCP endpoint (issue 35) with the official SDK's client against the shared planes: an agent
// with an admin's key lists the tools and reads on two clusters (objects, descriptions, a pod's
// log, an object's events, search); a viewer's agent cannot read Secrets; a role limited to one
// namespace or one cluster gets that and no more; kiteline's own namespace on the host stays out;
// answers above 64 KiB are cut with a note; each call is one audit record and one /metrics count;
// an MCP token works only on /mcp, as its user, until revoked; tool calls are limited per caller;
// a deleted key ends the agent's access; anonymous callers, session cookies and GET /mcp are refused.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { createHash } from 'node:crypto';
import { createServer, request as httpRequest } from 'node:http';
import t, { type Test } from 'tap';
import WebSocket from 'ws';
import { parse } from 'yaml';
import { kubectl, testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import {
  addReadyCluster,
  apiKeyWithRoles,
  bootstrapAdmin,
  createRole,
  signedInUser,
  testKubeconfig,
  type Caller,
} from './helpers/fixtures.js';
import { auditRecordOf, call, startGateway } from './helpers/gateway.js';
import { parseApiKey } from '../src/credentials/apikey-token.js';

const target = (await testControlPlane('target-a')).kubeconfigPath;
const targetB = (await testControlPlane('target-b')).kubeconfigPath;
const gw = await startGateway(t, { logName: 'mcp', env: { KITELINE_AUDIT_FLUSH_INTERVAL_MS: '200' } });
const admin = await bootstrapAdmin(gw);
await addReadyCluster(gw, admin, { name: 'a', config: testKubeconfig('target-a') });
await addReadyCluster(gw, admin, { name: 'b', config: testKubeconfig('target-b') });
await addReadyCluster(gw, admin, { name: 'h', config: testKubeconfig('host') });

const ns = uniqueName('mcp');
for (const kubeconfig of [target, targetB]) {
  kubectl(kubeconfig, ['create', 'namespace', ns]);
  kubectl(kubeconfig, [
    '-n',
    ns,
    'create',
    'configmap',
    'settings',
    `--from-literal=where=${kubeconfig}`,
    '--save-config',
  ]);
  kubectl(kubeconfig, ['-n', ns, 'create', 'secret', 'generic', 'token', '--from-literal=value=s3cr3t-value']);
}
t.teardown(() => {
  for (const kubeconfig of [target, targetB]) kubectl(kubeconfig, ['delete', 'namespace', ns, '--wait=false']);
});

/** A raw MCP initialize request, for the refusals the SDK client would only throw on. */
const initialize = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};
const MCP_ACCEPT = { accept: 'application/json, text/event-stream' };

const READ_TOOLS = [
  'describe_resource',
  'get_resource',
  'list_clusters',
  'list_resources',
  'pod_logs',
  'resource_events',
  'search',
];
const WRITE_TOOLS = [
  'apply_yaml',
  'cordon_node',
  'delete_resource',
  'exec',
  'patch_resource',
  'rollout_restart',
  'scale',
  'uncordon_node',
];

type ToolAnswer = { isError?: boolean; content: Array<{ type: string; text: string }> };

/** An MCP client of the SDK connected to /mcp with the caller's key. */
async function agent(caller: Caller, name = 'test-agent'): Promise<Client> {
  const client = new Client({ name, version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${gw.url}/mcp`), {
    requestInit: { headers: { ...caller.headers, 'user-agent': `${name}/1.0` } },
  });
  await client.connect(transport);
  t.teardown(() => client.close());
  return client;
}

async function tool(client: Client, name: string, args: Record<string, unknown> = {}): Promise<ToolAnswer> {
  return (await client.callTool({ name, arguments: args })) as ToolAnswer;
}
const textOf = (answer: ToolAnswer) => answer.content.map((c) => c.text).join('');

/** Deletes the API key named `name` and waits until its agent's calls are refused (401). */
async function deleteKeyUntilRefused(t: Test, name: string, client: Client): Promise<void> {
  const keys = await call(gw.url, 'GET', '/api/v1/admin/apikeys/', { headers: admin.headers });
  const id = keys.body.apiKeys.find((k: { name: string }) => k.name === name).id;
  t.equal((await call(gw.url, 'DELETE', `/api/v1/admin/apikeys/${id}`, { headers: admin.headers })).status, 200);
  await eventually('the deleted key refused', async () =>
    client.callTool({ name: 'list_clusters', arguments: {} }).then(
      () => false,
      (err: Error) => /401|Unauthorized/i.test(err.message),
    ),
  );
}

t.test("an admin's agent: the read tools, on two clusters", async (t) => {
  const client = await agent(admin);
  const tools = (await client.listTools()).tools;
  t.same(tools.map((x) => x.name).sort(), [...READ_TOOLS, ...WRITE_TOOLS].sort(), 'the read and the write tools');
  t.ok(
    tools.every((x) => (x.annotations?.readOnlyHint === true) === READ_TOOLS.includes(x.name)),
    'each read tool says it only reads, and no write tool does',
  );
  const clusters = textOf(await tool(client, 'list_clusters'));
  for (const c of ['a', 'b', 'h']) t.match(clusters, new RegExp(`name: ${c}\\n`), `cluster ${c} listed`);

  for (const [c, kubeconfig] of [
    ['a', target],
    ['b', targetB],
  ] as const) {
    const list = await tool(client, 'list_resources', { cluster: c, resource: 'configmaps', namespace: ns });
    t.notOk(list.isError, textOf(list));
    t.match(textOf(list), /name: settings/, `cluster ${c}: the list`);
    const got = await tool(client, 'get_resource', {
      cluster: c,
      resource: 'configmaps',
      namespace: ns,
      name: 'settings',
    });
    t.match(textOf(got), new RegExp(`where: ${kubeconfig}`), `cluster ${c}: the object, from that cluster`);
    t.notMatch(textOf(got), /managedFields/, 'without managedFields');
    t.notMatch(textOf(got), /last-applied-configuration/, 'without the last-applied copy (--save-config made one)');
  }
  const described = await tool(client, 'describe_resource', {
    cluster: 'a',
    resource: 'configmaps',
    namespace: ns,
    name: 'settings',
  });
  t.match(textOf(described), /^Name:\s+settings$/m, "kubectl describe's text");
  const nodes = await tool(client, 'list_resources', { cluster: 'a', resource: 'nodes' });
  t.match(textOf(nodes), /kind: Node/, 'a cluster-scoped kind, without a namespace');
  const missing = await tool(client, 'get_resource', {
    cluster: 'a',
    resource: 'configmaps',
    namespace: ns,
    name: 'nope',
  });
  t.ok(missing.isError, 'a missing object is a tool error');
  t.match(textOf(missing), /^404 /);
  const noCluster = await tool(client, 'list_resources', { cluster: 'nowhere', resource: 'pods' });
  t.match(textOf(noCluster), /^404 cluster not found/);
  const badArgs = await client
    .callTool({ name: 'list_resources', arguments: { cluster: 'a', resource: 'pods', namespace: 'Bad_NS' } })
    .then((r) => r as ToolAnswer)
    .catch((err: Error) => ({ isError: true, content: [{ type: 'text', text: err.message }] }));
  t.ok(badArgs.isError, `a bad namespace is refused: ${textOf(badArgs).slice(0, 120)}`);
});

t.test("logs, events and search: an admin's agent, a one-namespace role, kiteline's own namespace", async (t) => {
  // A pod on target-a (it has a node) that writes 1500 lines of about 110 bytes, then sleeps.
  const pad = 'x'.repeat(100);
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'talker', namespace: ns },
    spec: {
      terminationGracePeriodSeconds: 0,
      containers: [
        {
          name: 'main',
          image: 'kiteline.local/busybox:1',
          imagePullPolicy: 'Never',
          command: ['sh', '-c', `i=1; while [ $i -le 1500 ]; do echo "line-$i ${pad}"; i=$((i+1)); done; sleep 3600`],
        },
      ],
    },
  };
  t.equal(kubectl(target, ['apply', '-f', '-'], JSON.stringify(pod)).status, 0);
  t.equal(
    kubectl(target, ['-n', ns, 'wait', '--for=condition=Ready', 'pod/talker', '--timeout=120s']).status,
    0,
    'the pod runs',
  );
  const client = await agent(admin);
  const logs = (args: Record<string, unknown>) => tool(client, 'pod_logs', { cluster: 'a', namespace: ns, ...args });
  const lastLines = await eventually('the last line in the log', async () => {
    const answer = textOf(await logs({ pod: 'talker' }));
    return answer.includes('line-1500 ') ? answer : undefined;
  });
  t.equal(lastLines.split('\n').length, 100, 'the last 100 lines by default');
  t.match(lastLines, /^line-1401 x+\n/, 'from line 1401');
  t.equal(textOf(await logs({ pod: 'talker', tailLines: 2 })), `line-1499 ${pad}\nline-1500 ${pad}`, 'tailLines');
  const whole = textOf(await logs({ pod: 'talker', tailLines: 2000 }));
  t.match(
    whole,
    /^… \[truncated: the \d+ older lines read are left out \(64 KiB at most\); ask for fewer lines\]\n/,
    'cut, saying so',
  );
  t.match(whole, /line-1500 x+$/, 'the newest lines are the ones kept');
  t.ok(Buffer.byteLength(whole) <= 64 * 1024, 'within 64 KiB');
  t.match(textOf(await logs({ pod: 'talker', container: 'nope' })), /^400 /, "an unknown container: the cluster's 400");
  t.match(textOf(await logs({ pod: 'missing' })), /^404 /, 'an unknown pod: 404');

  // A hostile log: 1000 lines of 10 KiB (10 MiB) written at once. The read stops at 8 MiB (the
  // cluster's limitBytes) and the agent gets the newest 64 KiB of it, saying both.
  const flood = {
    ...pod,
    metadata: { name: 'flood', namespace: ns },
    spec: {
      ...pod.spec,
      containers: [
        {
          ...pod.spec.containers[0],
          command: ['sh', '-c', `yes "$(head -c 10240 /dev/zero | tr '\\0' f)" | head -n 1000; sleep 3600`],
        },
      ],
    },
  };
  t.equal(kubectl(target, ['apply', '-f', '-'], JSON.stringify(flood)).status, 0);
  t.equal(kubectl(target, ['-n', ns, 'wait', '--for=condition=Ready', 'pod/flood', '--timeout=120s']).status, 0);
  const flooded = await eventually('the whole flood in the log', async () => {
    const answer = textOf(await logs({ pod: 'flood', tailLines: 2000 }));
    return answer.includes('the read stopped at 8 MiB') ? answer : undefined;
  });
  t.ok(Buffer.byteLength(flooded) <= 64 * 1024, `within 64 KiB (${Buffer.byteLength(flooded)} bytes)`);
  t.match(flooded, /older lines read are left out/, 'the older lines left out, saying so');
  t.match(flooded, /\nf{10240}$/, 'whole lines of the log kept');

  const events = await eventually('the pod to have its scheduling event', async () => {
    const answer = textOf(
      await tool(client, 'resource_events', { cluster: 'a', resource: 'pods', namespace: ns, name: 'talker' }),
    );
    return /reason: Scheduled/.test(answer) ? answer : undefined;
  });
  t.match(
    parse(events).events.find((e: { reason: string }) => e.reason === 'Scheduled'),
    { type: 'Normal', last: String, from: 'default-scheduler', message: /talker/ },
    'type, reason, last seen, from, message',
  );
  // A ConfigMap on each cluster with an event of its own (target-b has no node, so no pod events).
  for (const [c, kubeconfig] of [
    ['a', target],
    ['b', targetB],
  ] as const) {
    const uid = kubectl(kubeconfig, [
      '-n',
      ns,
      'get',
      'configmap',
      'settings',
      '-o',
      'jsonpath={.metadata.uid}',
    ]).stdout;
    const event = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: uniqueName('settings-event'), namespace: ns },
      involvedObject: { apiVersion: 'v1', kind: 'ConfigMap', name: 'settings', namespace: ns, uid },
      reason: 'Checked',
      message: `checked on ${c}`,
      type: 'Warning',
      source: { component: 'mcp-test' },
      firstTimestamp: new Date().toISOString(),
      lastTimestamp: new Date().toISOString(),
      count: 2,
    };
    t.equal(kubectl(kubeconfig, ['create', '-f', '-'], JSON.stringify(event)).status, 0);
    const answer = parse(
      textOf(
        await tool(client, 'resource_events', { cluster: c, resource: 'configmaps', namespace: ns, name: 'settings' }),
      ),
    );
    t.match(
      answer,
      { events: [{ type: 'Warning', reason: 'Checked', count: 2, from: 'mcp-test', message: `checked on ${c}` }] },
      `cluster ${c}: the ConfigMap's event`,
    );
  }

  const found = parse(textOf(await tool(client, 'search', { cluster: 'a', query: 'talker' })));
  t.match(found, { total: 1, results: [{ resource: 'pods', namespace: ns, name: 'talker' }] }, 'search finds the pod');
  const onB = parse(textOf(await tool(client, 'search', { cluster: 'b', query: 'cm settings', namespace: ns })));
  t.match(onB, { results: [{ resource: 'configmaps', namespace: ns, name: 'settings' }] }, 'search on cluster b');

  // A role limited to the namespace: its pod's log, nothing of other namespaces.
  await createRole(gw, admin, {
    name: 'mcp-reads-ns',
    clusters: ['*'],
    namespaces: [ns],
    resources: ['*'],
    verbs: ['get', 'list'],
  });
  const limited = await agent(await apiKeyWithRoles(gw, admin, 'mcp-reads', ['mcp-reads-ns']), 'limited-agent');
  t.match(
    textOf(await tool(limited, 'pod_logs', { cluster: 'a', namespace: ns, pod: 'talker', tailLines: 1 })),
    /^line-1500 /,
  );
  const elsewherePod = 'any-pod'; // refused before the cluster is asked
  t.match(
    textOf(await tool(limited, 'pod_logs', { cluster: 'a', namespace: 'kube-system', pod: elsewherePod })),
    /^403 /,
    "another namespace's pod log: 403",
  );
  t.match(
    textOf(
      await tool(limited, 'resource_events', {
        cluster: 'a',
        resource: 'pods',
        namespace: 'kube-system',
        name: elsewherePod,
      }),
    ),
    /^403 /,
    "another namespace's events: 403",
  );
  const wide = parse(textOf(await tool(limited, 'search', { cluster: 'a', query: 'settings' })));
  t.ok(wide.results.length > 0, 'search finds what the role may list');
  t.ok(
    wide.results.every((r: { namespace?: string }) => r.namespace === ns),
    'and nothing of other namespaces',
  );

  // kiteline's own namespace on the host: no log, no events, nothing found, for an admin's agent too.
  const host = (await testControlPlane('host')).kubeconfigPath;
  // The same ConfigMap name in the install namespace and in another one.
  const hidden = uniqueName('hidden');
  const elsewhere = uniqueName('mcp-host');
  kubectl(host, ['create', 'namespace', elsewhere]);
  t.teardown(() => kubectl(host, ['delete', 'namespace', elsewhere, '--wait=false']));
  for (const where of [gw.namespace, elsewhere]) kubectl(host, ['-n', where, 'create', 'configmap', hidden]);
  t.teardown(() => kubectl(host, ['-n', gw.namespace, 'delete', 'configmap', hidden]));
  t.match(textOf(await tool(client, 'pod_logs', { cluster: 'h', namespace: gw.namespace, pod: 'any' })), /^403 /);
  t.match(
    textOf(
      await tool(client, 'resource_events', {
        cluster: 'h',
        resource: 'configmaps',
        namespace: gw.namespace,
        name: hidden,
      }),
    ),
    /^403 /,
  );
  const onHost = await eventually('the search index of the host to hold the ConfigMap', async () => {
    const answer = parse(textOf(await tool(client, 'search', { cluster: 'h', query: hidden })));
    return answer.total > 0 ? answer : undefined;
  });
  t.same(
    onHost.results.map((r: { namespace: string; name: string }) => [r.namespace, r.name]),
    [[elsewhere, hidden]],
    'search: the one elsewhere, not the one in the install namespace',
  );
});

t.test('role by role: a viewer, a role limited to one namespace, a role limited to one cluster', async (t) => {
  await createRole(gw, admin, {
    name: 'mcp-one-ns',
    clusters: ['*'],
    namespaces: [ns],
    resources: ['*'],
    verbs: ['get', 'list'],
  });
  await createRole(gw, admin, {
    name: 'mcp-b-only',
    clusters: ['b'],
    namespaces: ['*'],
    resources: ['*'],
    verbs: ['get', 'list'],
  });
  const viewer = await agent(await apiKeyWithRoles(gw, admin, 'mcp-viewer', ['viewer']), 'viewer-agent');
  t.same(
    (await viewer.listTools()).tools.map((x) => x.name).sort(),
    READ_TOOLS,
    "a viewer's agent is offered the read tools only",
  );
  const secret = await tool(viewer, 'get_resource', {
    cluster: 'a',
    resource: 'secrets',
    namespace: ns,
    name: 'token',
  });
  t.ok(secret.isError, "a viewer's agent cannot read a Secret");
  t.match(textOf(secret), /^403 /);
  t.notMatch(
    textOf(secret),
    new RegExp(`s3cr3t|${Buffer.from('s3cr3t-value').toString('base64')}`),
    'and sees no value',
  );
  const secrets = await tool(viewer, 'list_resources', { cluster: 'a', resource: 'secrets', namespace: ns });
  t.match(textOf(secrets), /^403 /, 'nor list them');
  const described = await tool(viewer, 'describe_resource', {
    cluster: 'a',
    resource: 'secrets',
    namespace: ns,
    name: 'token',
  });
  t.match(textOf(described), /^403 /, 'nor describe them');
  t.notOk(
    textOf(
      await tool(viewer, 'get_resource', { cluster: 'a', resource: 'configmaps', namespace: ns, name: 'settings' }),
    ).startsWith('403'),
    'a viewer reads a ConfigMap',
  );
  t.equal(
    textOf(await tool(viewer, 'pod_logs', { cluster: 'a', namespace: ns, pod: 'talker', tailLines: 1 })),
    `line-1500 ${'x'.repeat(100)}`,
    "and a pod's log, as on the REST route",
  );

  const limited = await agent(await apiKeyWithRoles(gw, admin, 'mcp-limited', ['mcp-one-ns']));
  t.notOk((await tool(limited, 'list_resources', { cluster: 'a', resource: 'configmaps', namespace: ns })).isError);
  const elsewhere = await tool(limited, 'list_resources', {
    cluster: 'a',
    resource: 'configmaps',
    namespace: 'default',
  });
  t.match(textOf(elsewhere), /^403 /, 'another namespace: 403');
  const everywhere = await tool(limited, 'list_resources', { cluster: 'a', resource: 'configmaps' });
  t.match(textOf(everywhere), /^403 /, 'all namespaces: 403');

  const bOnly = await agent(await apiKeyWithRoles(gw, admin, 'mcp-b', ['mcp-b-only']));
  const clusters = textOf(await tool(bOnly, 'list_clusters'));
  t.match(clusters, /name: b\n/);
  t.notMatch(clusters, /name: a\n/, 'only the clusters the role names');
  const onA = await tool(bOnly, 'list_resources', { cluster: 'a', resource: 'configmaps', namespace: ns });
  t.match(textOf(onA), /^404 cluster not found/, 'another cluster: the same 404 as an unknown one');
});

t.test("kiteline's own namespace on the host stays out, for an admin's agent too", async (t) => {
  const client = await agent(admin);
  const own = await tool(client, 'list_resources', { cluster: 'h', resource: 'secrets', namespace: gw.namespace });
  t.match(textOf(own), /^403 /, 'its Secrets: 403');
  const users = await tool(client, 'list_resources', { cluster: 'h', resource: 'users.kiteline.io' });
  t.match(textOf(users), /^403 /, "kiteline's users: 403");
  // One ConfigMap in the install namespace and one elsewhere, both with the same label.
  const host = (await testControlPlane('host')).kubeconfigPath;
  const mark = uniqueName('mark');
  kubectl(host, ['create', 'namespace', ns]);
  t.teardown(() => kubectl(host, ['delete', 'namespace', ns, '--wait=false']));
  for (const where of [ns, gw.namespace]) {
    kubectl(host, ['-n', where, 'create', 'configmap', `marked-${where}`]);
    kubectl(host, ['-n', where, 'label', 'configmap', `marked-${where}`, `mark=${mark}`]);
  }
  const all = await tool(client, 'list_resources', {
    cluster: 'h',
    resource: 'configmaps',
    labelSelector: `mark=${mark}`,
  });
  t.notOk(all.isError, textOf(all).slice(0, 200));
  t.match(textOf(all), new RegExp(`name: marked-${ns}`), 'the one elsewhere is listed');
  t.notMatch(textOf(all), new RegExp(`namespace: ${gw.namespace}`), 'the install namespace is not');
  kubectl(host, ['-n', gw.namespace, 'delete', 'configmap', `marked-${gw.namespace}`]);
});

t.test('a large answer is cut with a note; each call is audited and counted', async (t) => {
  const big = 'x'.repeat(200 * 1024);
  kubectl(
    target,
    ['-n', ns, 'apply', '-f', '-'],
    JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'big' }, data: { blob: big } }),
  );
  const client = await agent(admin, 'audit-agent');
  const got = textOf(
    await tool(client, 'get_resource', { cluster: 'a', resource: 'configmaps', namespace: ns, name: 'big' }),
  );
  t.ok(Buffer.byteLength(got) < 66 * 1024, `cut to about 64 KiB (${Buffer.byteLength(got)} bytes)`);
  t.match(got, /\[truncated: the answer was \d+ bytes, at most 65536 are shown/);

  const record = await eventually('the audit record of the call', async () => {
    const res = await call(gw.url, 'GET', `/api/v1/admin/audit-logs?operation=mcp:get_resource&resourceName=big`, {
      headers: admin.headers,
    });
    return res.body?.data?.[0];
  });
  t.match(record, {
    operationType: 'mcp:get_resource',
    clusterName: 'a',
    resourceType: 'configmaps',
    namespace: ns,
    resourceName: 'big',
    success: true,
    subject: 'audit-agent/1.0',
  });
  t.equal(record.operator.username, 'apikey:admin-key');
  const refused = await eventually('the audit record of a refusal', async () => {
    const res = await call(gw.url, 'GET', '/api/v1/admin/audit-logs?operation=mcp:get_resource&resourceName=token', {
      headers: admin.headers,
    });
    return res.body?.data?.find((r: { success: boolean }) => !r.success);
  });
  t.equal(refused.status, 403, "the viewer's refused read, recorded as such");
  for (const operation of ['mcp', 'POST'])
    t.same(
      (await call(gw.url, 'GET', `/api/v1/admin/audit-logs?operation=${operation}`, { headers: admin.headers })).body
        .data,
      [],
      `no record per HTTP request (operation ${operation}): initialize and tools/list are not actions`,
    );
  const metrics = await call(gw.url, 'GET', '/metrics', { headers: admin.headers });
  t.match(metrics.text, /kiteline_mcp_tool_calls_total\{tool="get_resource",result="success"\} [1-9]/);
  t.match(metrics.text, /kiteline_mcp_tool_calls_total\{tool="get_resource",result="failure"\} [1-9]/);
});

t.test('an MCP token: minted by a signed-in user, accepted only on /mcp, listed and revoked', async (t) => {
  const username = uniqueName('carol');
  // A viewer who may also exec into the namespace's pods (so a refused exec below is the token's door).
  await createRole(gw, admin, {
    name: 'mcp-token-exec',
    clusters: ['*'],
    namespaces: [ns],
    resources: ['pods/exec'],
    verbs: ['create'],
  });
  const cookie = await signedInUser(gw, admin, username, ['viewer', 'mcp-token-exec']);
  const mint = (headers: Record<string, string>, body?: object) =>
    call(gw.url, 'POST', '/api/v1/mcp/token', { headers, ...(body ? { body } : {}) });
  const minted = await mint({ cookie }, { ttlSeconds: 900 });
  t.equal(minted.status, 200, minted.text);
  t.equal(minted.headers.get('cache-control'), 'no-store');
  const token = minted.body.token as string;
  t.equal(minted.body.url, `${gw.url}/mcp`);
  t.same(minted.body.mcpServers, {
    kiteline: { type: 'http', url: `${gw.url}/mcp`, headers: { Authorization: `Bearer ${token}` } },
  });
  t.ok(Math.abs(Date.parse(minted.body.expiresAt) - Date.now() - 900_000) < 60_000, 'expires when asked');
  t.equal(minted.body.warning, undefined, 'plain http on loopback: no warning');
  const bearer = { authorization: `Bearer ${token}` };

  // The agent is the user: the user's roles, and the user in the audit trail.
  const client = await agent({ key: token, headers: bearer }, 'token-agent');
  const settings = { cluster: 'a', resource: 'configmaps', namespace: ns, name: 'settings' };
  t.match(textOf(await tool(client, 'get_resource', settings)), /where: /, "a viewer's read");
  t.match(textOf(await tool(client, 'get_resource', { ...settings, resource: 'secrets', name: 'token' })), /^403 /);
  const record = await eventually('the audit record of the call', async () => {
    const res = await call(gw.url, 'GET', '/api/v1/admin/audit-logs?operation=mcp:get_resource&resourceName=settings', {
      headers: admin.headers,
    });
    return res.body?.data?.find((r: { operator: { username: string } }) => r.operator.username === username);
  });
  t.equal(record.operator.username, username, 'audited as the user');

  // Only /mcp: not kiteline's API, not the Kubernetes API, and it mints nothing.
  const elsewhere = await call(gw.url, 'GET', '/api/v1/clusters', { headers: bearer });
  t.equal(elsewhere.status, 403);
  t.match(elsewhere.body.error, /an MCP token is accepted only on \/mcp/);
  t.equal((await call(gw.url, 'GET', '/k8s/clusters/a/version', { headers: bearer })).status, 403, 'nor kubectl');
  // An exec over WebSocket is an upgrade the router never sees (plugins/upgrades.ts): refused too.
  const execStatus = (headers: Record<string, string>) =>
    new Promise<number>((resolve, reject) => {
      const path = `/k8s/clusters/a/api/v1/namespaces/${ns}/pods/talker/exec?command=id&stdout=true`;
      const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}${path}`, ['v4.channel.k8s.io'], { headers });
      ws.on('unexpected-response', (_request, response) => {
        resolve(response.statusCode ?? 0);
        ws.terminate();
      });
      ws.on('open', () => {
        resolve(101);
        ws.terminate();
      });
      ws.on('error', reject);
    });
  const refusedExec = uniqueName('refused-exec');
  t.equal(await execStatus({ ...bearer, 'x-request-id': refusedExec }), 403, 'nor kubectl exec');
  const refusal = await eventually('the refused exec in the audit log', () => auditRecordOf('mcp', refusedExec));
  t.match(refusal, { who: username, result: 'failure', status: 403 }, "audited as the token's user");
  t.equal((await mint(bearer)).status, 403, 'it mints no MCP token');
  t.equal((await call(gw.url, 'POST', '/api/v1/kubeconfig', { headers: bearer })).status, 403, 'nor a kubeconfig');
  t.equal((await mint(admin.headers)).status, 403, 'an API key mints none either: tokens are for signed-in users');
  t.equal((await mint({ cookie }, { ttlSeconds: 10 ** 9 })).status, 400, 'a lifetime above the maximum: 400');
  t.equal((await mint({}, {})).status, 401, 'anonymous: 401');

  // A kubeconfig token is refused on /mcp.
  const kubeconfig = await call(gw.url, 'POST', '/api/v1/kubeconfig', { headers: { cookie } });
  const kubeToken = /token: (\S+)/.exec(kubeconfig.text)![1];
  t.equal(await execStatus({ authorization: `Bearer ${kubeToken}` }), 101, "the user's kubeconfig token may exec");
  const byKubeToken = await call(gw.url, 'POST', '/mcp', {
    body: initialize,
    headers: { ...MCP_ACCEPT, authorization: `Bearer ${kubeToken}` },
  });
  t.equal(byKubeToken.status, 403, 'a kubeconfig token on /mcp: 403');

  // Listed with the user's kubeconfig tokens, each with its audience; revoked like them.
  const mine = await call(gw.url, 'GET', '/api/users/me/kubeconfig-tokens', { headers: { cookie } });
  t.same(mine.body.tokens.map((x: { audience: string }) => x.audience).sort(), ['kubernetes', 'mcp']);
  const mcpToken = mine.body.tokens.find((x: { audience: string }) => x.audience === 'mcp');
  t.match(mcpToken.name, /^mcp-carol/);
  // The whole secret (a base64url secret may hold `_`: its last part alone can be one letter).
  t.notMatch(JSON.stringify(mine.body), parseApiKey(token)!.secret, 'never the secret');
  const revoked = await call(gw.url, 'DELETE', `/api/users/me/kubeconfig-tokens/${mcpToken.id}`, {
    headers: { cookie },
  });
  t.equal(revoked.status, 200);
  await eventually('the revoked token refused', async () =>
    client.callTool({ name: 'list_clusters', arguments: {} }).then(
      () => false,
      (err: Error) => /401|Unauthorized/i.test(err.message),
    ),
  );
  t.pass('a revoked token ends the agent');

  // A token tried only at doors it does not open has not been used: its last use stays unset,
  // while that of a token used at /mcp afterwards is recorded.
  const idle = { authorization: `Bearer ${(await mint({ cookie })).body.token as string}` };
  t.equal((await call(gw.url, 'GET', '/api/v1/clusters', { headers: idle })).status, 403);
  t.equal(await execStatus(idle), 403);
  const used = { authorization: `Bearer ${(await mint({ cookie })).body.token as string}` };
  const init = await call(gw.url, 'POST', '/mcp', { body: initialize, headers: { ...MCP_ACCEPT, ...used } });
  t.equal(init.status, 200, init.text);
  // Listed oldest first: the idle token, then the used one. Once the later use is recorded, the
  // earlier refusals would have been (their writes were sent first).
  const tokens = await eventually('the use at /mcp recorded', async () => {
    const res = await call(gw.url, 'GET', '/api/users/me/kubeconfig-tokens', { headers: { cookie } });
    const mcp = (res.body.tokens as { audience: string; lastUsedAt: string | null }[]).filter(
      (x) => x.audience === 'mcp',
    );
    return mcp.length === 2 && mcp[1].lastUsedAt ? mcp : undefined;
  });
  t.equal(tokens[0].lastUsedAt, null, 'the one tried at other doors: never used');
});

t.test('tool calls per principal and minute: then a 429 tool error, for that caller only', async (t) => {
  const limited = await startGateway(t, { logName: 'mcp-limit', env: { KITELINE_MCP_TOOL_CALLS_PER_MINUTE: '3' } });
  const limitedAdmin = await bootstrapAdmin(limited, 'limit-admin');
  const other = await apiKeyWithRoles(limited, limitedAdmin, 'mcp-other', ['viewer']);
  const connect = async (caller: Caller) => {
    const client = new Client({ name: 'limited', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${limited.url}/mcp`), { requestInit: { headers: caller.headers } }),
    );
    t.teardown(() => client.close());
    return client;
  };
  const busy = await connect(limitedAdmin);
  for (let i = 0; i < 3; i++) t.notOk((await tool(busy, 'list_clusters')).isError, `call ${i + 1} of 3`);
  const fourth = await tool(busy, 'list_clusters');
  t.ok(fourth.isError);
  t.match(textOf(fourth), /^429 too many tool calls; try again in \d+ seconds/);
  t.notOk((await tool(await connect(other), 'list_clusters')).isError, 'another key is not held back');
});

t.test('refused: anonymous, a session cookie, a deleted key; GET /mcp is 405', async (t) => {
  const anonymous = new Client({ name: 'anon', version: '1' });
  await t.rejects(
    anonymous.connect(new StreamableHTTPClientTransport(new URL(`${gw.url}/mcp`))),
    'anonymous: the connection is refused',
  );
  const headers = MCP_ACCEPT;
  const anon = await call(gw.url, 'POST', '/mcp', { body: initialize, headers });
  t.equal(anon.status, 401, 'anonymous: 401');
  const login = await call(gw.url, 'POST', '/api/auth/login/password', {
    body: { username: 'admin', password: 'correct-horse-battery' },
  });
  const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0];
  const byCookie = await call(gw.url, 'POST', '/mcp', { body: initialize, headers: { ...headers, cookie } });
  t.equal(byCookie.status, 401, 'a session cookie: 401 (agents use keys)');
  t.match(byCookie.body.error, /API key/);
  const byKey = await call(gw.url, 'POST', '/mcp', { body: initialize, headers: { ...headers, ...admin.headers } });
  t.equal(byKey.status, 200, byKey.text.slice(0, 200));
  t.equal(byKey.body.result.serverInfo.name, 'kiteline');
  const get = await call(gw.url, 'GET', '/mcp', { headers: admin.headers });
  t.equal(get.status, 405);
  t.equal(get.headers.get('allow'), 'POST, DELETE');
  const del = await call(gw.url, 'DELETE', '/mcp', { headers: admin.headers });
  t.equal(del.status, 405, 'DELETE without a session: 405');

  const key = await apiKeyWithRoles(gw, admin, 'mcp-doomed', ['viewer']);
  const client = await agent(key);
  t.notOk((await tool(client, 'list_clusters')).isError);
  await deleteKeyUntilRefused(t, 'mcp-doomed', client);
  t.pass('a deleted key ends the agent');
});

t.test('a token minted for a plain-http address that is not loopback comes with a warning', async (t) => {
  const cookie = await signedInUser(gw, admin, uniqueName('mcp-warned'), ['viewer']);
  // fetch will not send another Host: node:http does, as a client that reached kiteline by that name would.
  const answer = await new Promise<{ url: string; warning?: string }>((resolve, reject) => {
    const req = httpRequest(
      `${gw.url}/api/v1/mcp/token`,
      { method: 'POST', headers: { cookie, host: 'kiteline.example' } },
      (res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => (body += chunk.toString()));
        res.on('end', () => resolve(JSON.parse(body) as { url: string; warning?: string }));
      },
    );
    req.on('error', reject);
    req.end();
  });
  t.equal(answer.url, 'http://kiteline.example/mcp', 'the address the caller used');
  t.match(answer.warning, /plain http/, 'and a warning');
});

// ---- writes: a human confirms through MCP elicitation (a session), roles may waive or deny ----

const host = (await testControlPlane('host')).kubeconfigPath;

/** The kiteline object (kind: clusters or roles) whose display name is `name`, in the gateway's namespace. */
function kitelineObject(kind: 'clusters' | 'roles', name: string): string {
  const list = JSON.parse(kubectl(host, ['-n', gw.namespace, 'get', `${kind}.kiteline.io`, '-o', 'json']).stdout) as {
    items: Array<{ metadata: { name: string }; spec: { name?: string } }>;
  };
  const found = list.items.find((o) => (o.spec.name || o.metadata.name) === name);
  if (!found) throw new Error(`no ${kind} object named ${name}`);
  return found.metadata.name;
}

/** Sets a role's MCP rules (spec.mcp: kubectl or GitOps set them; the admin API leaves them as they are). */
function setAgentRules(role: string, mcp: Record<string, unknown>): void {
  const patch = JSON.stringify({ spec: { mcp } });
  const res = kubectl(host, [
    '-n',
    gw.namespace,
    'patch',
    'roles.kiteline.io',
    kitelineObject('roles', role),
    '--type=merge',
    '-p',
    patch,
  ]);
  if (res.status !== 0) throw new Error(res.stderr);
}

interface Question {
  message: string;
}

/**
 * An agent whose client can answer questions (it declares elicitation, so it gets a session): each
 * question is kept and answered by `answer` (yes by default).
 */
async function askingAgent(
  caller: Caller,
  name: string,
  answer: (q: Question) => { action: 'accept' | 'decline' | 'cancel'; content?: Record<string, unknown> } = () => ({
    action: 'accept',
    content: { confirm: true },
  }),
  url = gw.url,
): Promise<{ client: Client; questions: Question[]; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name, version: '1.0.0' }, { capabilities: { elicitation: {} } });
  const questions: Question[] = [];
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    const q = { message: request.params.message };
    questions.push(q);
    return answer(q);
  });
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
    requestInit: { headers: { ...caller.headers, 'user-agent': `${name}/1.0` } },
  });
  await client.connect(transport);
  t.teardown(() => client.close());
  return { client, questions, transport };
}

const configMapData = (kubeconfig: string, name: string) => {
  const res = kubectl(kubeconfig, ['-n', ns, 'get', 'configmap', name, '-o', 'json']);
  return res.status === 0 ? (JSON.parse(res.stdout) as { data?: Record<string, string> }).data : undefined;
};

t.test("an admin's agent writes on two clusters after a human says yes, and nothing when they say no", async (t) => {
  for (const kubeconfig of [target, targetB])
    kubectl(kubeconfig, ['-n', ns, 'create', 'configmap', 'writable', '--from-literal=mode=before']);
  const { client, questions, transport } = await askingAgent(admin, 'writer-agent');
  t.ok(transport.sessionId, 'a client that can answer questions gets a session');

  for (const [c, kubeconfig] of [
    ['a', target],
    ['b', targetB],
  ] as const) {
    const patched = await tool(client, 'patch_resource', {
      cluster: c,
      resource: 'configmaps',
      namespace: ns,
      name: 'writable',
      patch: { data: { mode: `after-${c}` } },
    });
    t.notOk(patched.isError, textOf(patched));
    t.match(textOf(patched), /^done: patch configmaps .*\/writable/);
    t.same(configMapData(kubeconfig, 'writable'), { mode: `after-${c}` }, `cluster ${c}: patched`);
    const asked = questions.at(-1)!.message;
    t.match(asked, new RegExp(`patch configmaps ${ns}/writable on cluster ${c}`), 'the question names what and where');
    t.match(asked, /-\s+mode: before\n\+\s+mode: after-/, "and shows the dry run's diff");
  }

  const no = await askingAgent(admin, 'declined-agent', () => ({ action: 'decline' }));
  const declined = await tool(no.client, 'patch_resource', {
    cluster: 'a',
    resource: 'configmaps',
    namespace: ns,
    name: 'writable',
    patch: { data: { mode: 'never' } },
  });
  t.ok(declined.isError);
  t.match(textOf(declined), /^428 not done: the user declined/);
  t.same(configMapData(target, 'writable'), { mode: 'after-a' }, 'declined: unchanged');
  const saidNo = await askingAgent(admin, 'no-agent', () => ({ action: 'accept', content: { confirm: false } }));
  const unconfirmed = await tool(saidNo.client, 'delete_resource', {
    cluster: 'a',
    resource: 'configmaps',
    namespace: ns,
    name: 'writable',
  });
  t.match(textOf(unconfirmed), /^428 not done: the user answered no/);
  t.ok(configMapData(target, 'writable'), 'answered no: not deleted');

  // Apply, scale and restart on target-b (no node: the objects are what matters), delete on target-a.
  const deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'web', namespace: ns },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: 'web' } },
      template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
    },
  };
  const applied = await tool(client, 'apply_yaml', { cluster: 'b', yaml: JSON.stringify(deployment) });
  t.match(textOf(applied), /^done:\n/, textOf(applied));
  t.match(
    questions.at(-1)!.message,
    /kind: Deployment[\s\S]*name: web[\s\S]*result: created/,
    'the dry run, per document',
  );
  const scaled = await tool(client, 'scale', {
    cluster: 'b',
    resource: 'deployments',
    namespace: ns,
    name: 'web',
    replicas: 3,
  });
  t.notOk(scaled.isError, textOf(scaled));
  t.match(questions.at(-1)!.message, /-\s+replicas: 1\n\+\s+replicas: 3/);
  const replicas = kubectl(targetB, ['-n', ns, 'get', 'deployment', 'web', '-o', 'jsonpath={.spec.replicas}']);
  t.equal(replicas.stdout, '3', 'scaled');
  const restarted = await tool(client, 'rollout_restart', {
    cluster: 'b',
    resource: 'deployments',
    namespace: ns,
    name: 'web',
  });
  t.notOk(restarted.isError, textOf(restarted));
  const annotations = kubectl(targetB, [
    '-n',
    ns,
    'get',
    'deployment',
    'web',
    '-o',
    'jsonpath={.spec.template.metadata.annotations}',
  ]);
  t.match(annotations.stdout, /kubectl.kubernetes.io\/restartedAt/, 'restarted as kubectl does');

  // A Node object of its own on target-b (no kubelet there): cordon and uncordon it.
  const node = uniqueName('mcp-node');
  kubectl(targetB, ['create', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'Node', metadata: { name: node } }));
  t.teardown(() => void kubectl(targetB, ['delete', 'node', node, '--wait=false']));
  t.notOk((await tool(client, 'cordon_node', { cluster: 'b', node })).isError);
  t.equal(kubectl(targetB, ['get', 'node', node, '-o', 'jsonpath={.spec.unschedulable}']).stdout, 'true', 'cordoned');
  t.notOk((await tool(client, 'uncordon_node', { cluster: 'b', node })).isError);
  t.equal(kubectl(targetB, ['get', 'node', node, '-o', 'jsonpath={.spec.unschedulable}']).stdout, '', 'uncordoned');

  const exec = await tool(client, 'exec', {
    cluster: 'a',
    namespace: ns,
    pod: 'talker',
    command: ['sh', '-c', 'echo out-line; echo err-line >&2; exit 3'],
  });
  t.notOk(exec.isError, textOf(exec));
  t.match(
    parse(textOf(exec)),
    { exitCode: 3, stdout: 'out-line\n', stderr: 'err-line\n' },
    'one-shot exec: code and output',
  );
  t.match(questions.at(-1)!.message, /Command: \["sh","-c","echo out-line/, 'the question shows the command');
  const flood = await tool(client, 'exec', {
    cluster: 'a',
    namespace: ns,
    pod: 'talker',
    command: ['sh', '-c', 'yes kiteline | head -c 200000'],
  });
  t.match(parse(textOf(flood)).note, /output truncated: the first 49152 bytes/, 'a large output is cut with a note');

  const deleted = await tool(client, 'delete_resource', {
    cluster: 'a',
    resource: 'configmaps',
    namespace: ns,
    name: 'writable',
  });
  t.notOk(deleted.isError, textOf(deleted));
  await eventually('the ConfigMap gone', async () => configMapData(target, 'writable') === undefined);
  t.match(questions.at(-1)!.message, /DELETE configmaps/);

  const record = await eventually('the audit record of the patch on b', async () => {
    const res = await call(gw.url, 'GET', `/api/v1/admin/audit-logs?operation=mcp:patch_resource&cluster=b`, {
      headers: admin.headers,
    });
    return res.body?.data?.find((r: { success: boolean }) => r.success);
  });
  t.match(record, {
    clusterName: 'b',
    resourceType: 'configmaps',
    resourceName: 'writable',
    subject: 'writer-agent/1.0',
  });
  t.same(
    JSON.parse(record.arguments),
    { patchType: 'strategic', patch: { data: { mode: 'after-b' } } },
    'its arguments',
  );
  const refusedRecord = await eventually('the audit record of the declined patch', async () => {
    const res = await call(gw.url, 'GET', `/api/v1/admin/audit-logs?operation=mcp:patch_resource&cluster=a`, {
      headers: admin.headers,
    });
    return res.body?.data?.find((r: { success: boolean }) => !r.success);
  });
  t.equal(refusedRecord.status, 428, 'a declined write is recorded as such');
});

t.test(
  'a client that cannot ask gets 428; roles waive the question, except on production; roles deny tools and kinds',
  async (t) => {
    kubectl(target, ['-n', ns, 'create', 'configmap', 'trusted', '--from-literal=mode=before']);
    kubectl(targetB, ['-n', ns, 'create', 'configmap', 'trusted', '--from-literal=mode=before']);
    const stateless = await agent(admin, 'plain-agent');
    const patch = (c: string) => ({
      cluster: c,
      resource: 'configmaps',
      namespace: ns,
      name: 'trusted',
      patch: { data: { mode: c } },
    });
    const refused = await tool(stateless, 'patch_resource', patch('a'));
    t.match(textOf(refused), /^428 not done: this write needs a human's confirmation/);
    t.same(configMapData(target, 'trusted'), { mode: 'before' }, 'nothing changed');

    await createRole(gw, admin, {
      name: 'mcp-trusted',
      clusters: ['*'],
      namespaces: [ns],
      resources: ['configmaps', 'secrets'],
      verbs: ['*'],
    });
    setAgentRules('mcp-trusted', { confirmWrites: false, denyTools: ['delete_*'] });
    const trusted = await agent(await apiKeyWithRoles(gw, admin, 'mcp-trusted-key', ['mcp-trusted']), 'trusted-agent');
    await eventually('the waiver in force', async () => !(await tool(trusted, 'patch_resource', patch('a'))).isError);
    t.same(configMapData(target, 'trusted'), { mode: 'a' }, 'a role that waives the question: written without one');
    const names = (await trusted.listTools()).tools.map((x) => x.name);
    t.notOk(names.includes('delete_resource'), 'a denied tool is not offered');
    t.ok(names.includes('patch_resource'));
    // The role reaches configmaps and secrets of one namespace: nothing else, waiver or not.
    const elsewhere = await tool(trusted, 'patch_resource', {
      ...patch('a'),
      namespace: 'default',
      name: 'kube-root-ca.crt',
    });
    t.match(textOf(elsewhere), /^403 /, 'a one-namespace role: another namespace is refused');
    const root = kubectl(target, ['-n', 'default', 'get', 'configmap', 'kube-root-ca.crt', '-o', 'json']);
    t.notOk(JSON.parse(root.stdout).data?.mode, 'and unchanged');
    const execElsewhere = await tool(trusted, 'exec', { cluster: 'a', namespace: ns, pod: 'talker', command: ['id'] });
    t.match(textOf(execElsewhere), /^403 /, 'an exec its role does not grant (pods/exec): refused');

    const clusterB = kitelineObject('clusters', 'b');
    kubectl(host, ['-n', gw.namespace, 'label', 'clusters.kiteline.io', clusterB, 'kiteline.io/production=true']);
    t.teardown(
      () =>
        void kubectl(host, ['-n', gw.namespace, 'label', 'clusters.kiteline.io', clusterB, 'kiteline.io/production-']),
    );
    const onProduction = await eventually('cluster b production', async () => {
      const answer = await tool(trusted, 'patch_resource', patch('b'));
      return /production/.test(textOf(answer)) ? answer : undefined;
    });
    t.match(textOf(onProduction), /^428 not done: this write needs a human's confirmation \(cluster b is production\)/);
    t.same(configMapData(targetB, 'trusted'), { mode: 'before' }, 'production: not written without a human');
    const clusters = await call(gw.url, 'GET', '/api/v1/admin/clusters/', { headers: admin.headers });
    t.equal(clusters.body.find((c: { name: string }) => c.name === 'b')?.production, true, 'the admin API shows it');
    const asking = await askingAgent(await apiKeyWithRoles(gw, admin, 'mcp-trusted-asker', ['mcp-trusted']), 'asker');
    t.notOk((await tool(asking.client, 'patch_resource', patch('b'))).isError);
    t.match(asking.questions.at(-1)?.message ?? '', /on cluster b \(PRODUCTION\)/, 'production: asked even so');

    setAgentRules('mcp-trusted', { confirmWrites: false, denyResources: ['secrets'] });
    const secretRead = await eventually('secrets denied to agents', async () => {
      const answer = await tool(trusted, 'get_resource', {
        cluster: 'a',
        resource: 'secrets',
        namespace: ns,
        name: 'token',
      });
      return answer.isError ? answer : undefined;
    });
    t.match(textOf(secretRead), /^403 a role of yours keeps secrets from AI agents/);
    const secretPatch = await tool(trusted, 'patch_resource', {
      cluster: 'a',
      resource: 'secrets',
      namespace: ns,
      name: 'token',
      patch: { stringData: { value: 'agent-was-here' } },
    });
    t.match(textOf(secretPatch), /^403 /, 'nor written');
    const record = await eventually('the refused Secret patch audited', async () => {
      const res = await call(
        gw.url,
        'GET',
        `/api/v1/admin/audit-logs?operation=mcp:patch_resource&resourceName=token`,
        {
          headers: admin.headers,
        },
      );
      return res.body?.data?.[0];
    });
    t.equal(JSON.parse(record.arguments).patch, '(a patch of a Secret: not stored)', "a Secret's patch is not stored");
    t.notMatch(JSON.stringify(record), /agent-was-here/);
  },
);

t.test('a session ends with its key, and only its own key may use it', async (t) => {
  const key = await apiKeyWithRoles(gw, admin, 'mcp-session-doomed', ['admin']);
  const { client, transport } = await askingAgent(key, 'doomed-agent');
  t.notOk((await tool(client, 'list_clusters')).isError);
  const stolen = await call(gw.url, 'POST', '/mcp', {
    body: { jsonrpc: '2.0', id: 9, method: 'tools/list' },
    headers: {
      ...MCP_ACCEPT,
      ...admin.headers,
      'mcp-session-id': transport.sessionId!,
      'mcp-protocol-version': '2025-06-18',
    },
  });
  t.equal(stolen.status, 404, "another key with the session's id: as if there were none");
  t.equal(stolen.body.error.code, -32001, 'a JSON-RPC error');
  const ended = await askingAgent(key, 'ending-agent');
  const sessionHeaders = { ...MCP_ACCEPT, ...key.headers, 'mcp-protocol-version': '2025-06-18' };
  const byId = (id: string) => ({ ...sessionHeaders, 'mcp-session-id': id });
  t.equal(
    (await call(gw.url, 'DELETE', '/mcp', { headers: byId(ended.transport.sessionId!) })).status,
    204,
    'DELETE ends it',
  );
  const afterwards = await call(gw.url, 'POST', '/mcp', {
    body: { jsonrpc: '2.0', id: 10, method: 'tools/list' },
    headers: byId(ended.transport.sessionId!),
  });
  t.equal(afterwards.status, 404, 'an ended session is not found');
  await deleteKeyUntilRefused(t, 'mcp-session-doomed', client);
  t.pass("a deleted key ends its agent's session");
});

t.test('two replicas behind a balancer that alternates: a session is handed to the replica holding it', async (t) => {
  // Each replica names itself in the ids of the sessions it opens (its peer URL, signed).
  const second = await startGateway(t, { namespace: gw.namespace, logName: 'mcp' });
  gw.config.peerUrl = gw.url;
  second.config.peerUrl = second.url;
  t.teardown(() => void (gw.config.peerUrl = undefined));
  // A Service without affinity: each request to the next replica.
  const replicas = [gw.url, second.url];
  const sent = [0, 0];
  let next = 0;
  const balancer = createServer((req, res) => {
    const i = next++ % 2;
    sent[i]++;
    const upstream = httpRequest(`${replicas[i]}${req.url}`, { method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => balancer.listen(0, '127.0.0.1', resolve));
  t.teardown(() => balancer.close());
  const { port } = balancer.address() as { port: number };

  kubectl(target, ['-n', ns, 'create', 'configmap', 'balanced', '--from-literal=mode=before']);
  const { client, questions, transport } = await askingAgent(
    admin,
    'balanced-agent',
    undefined,
    `http://127.0.0.1:${port}`,
  );
  t.match(transport.sessionId, /^[0-9a-f-]{36}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/, 'the id names its replica');
  for (let i = 0; i < 3; i++) t.ok((await client.listTools()).tools.length > 10, `tools/list ${i + 1}`);
  const patched = await tool(client, 'patch_resource', {
    cluster: 'a',
    resource: 'configmaps',
    namespace: ns,
    name: 'balanced',
    patch: { data: { mode: 'balanced' } },
  });
  t.notOk(patched.isError, textOf(patched));
  t.equal(questions.length, 1, 'the question reached the agent, its answer the waiting call');
  t.same(configMapData(target, 'balanced'), { mode: 'balanced' }, 'written after the yes');
  t.ok(sent[0] > 1 && sent[1] > 1, `both replicas were sent the session's requests (${sent.join(', ')})`);

  const [uuid, holder] = transport.sessionId!.split('.');
  const forged = `${uuid}.${holder}.${'A'.repeat(43)}`;
  const answer = await call(second.url, 'POST', '/mcp', {
    body: { jsonrpc: '2.0', id: 3, method: 'tools/list' },
    headers: { ...MCP_ACCEPT, ...admin.headers, 'mcp-session-id': forged, 'mcp-protocol-version': '2025-06-18' },
  });
  t.equal(answer.status, 404, 'an id whose signature does not hold names no replica: 404');
  const digest = createHash('sha256').update(String(admin.headers.authorization)).digest('hex');
  const claimed = await call(gw.url, 'POST', '/mcp', {
    body: { jsonrpc: '2.0', id: 4, method: 'tools/list' },
    headers: {
      ...MCP_ACCEPT,
      'mcp-session-id': transport.sessionId!,
      'mcp-protocol-version': '2025-06-18',
      'x-kiteline-mcp-forwarded': `${digest}.${Math.floor(Date.now() / 1000) + 10}.${'A'.repeat(43)}`,
    },
  });
  t.equal(claimed.status, 401, "a handed-over request whose claim is not a replica's: 401, without a credential");
});
