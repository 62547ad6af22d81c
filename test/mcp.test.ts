// The MCP endpoint (issue 35, first part) with the official SDK's client against the shared planes:
// an agent with an admin's key lists the tools and reads on two clusters; a viewer's agent cannot
// read Secrets; a role limited to one namespace or one cluster gets that and no more; kiteline's own
// namespace on the host stays out; answers above 64 KiB are cut with a note; each call is one audit
// record and one /metrics count; a deleted key ends the agent's access; anonymous callers, session
// cookies and GET /mcp are refused.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import t from 'tap';
import { kubectl, testControlPlane, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import {
  addReadyCluster,
  apiKeyWithRoles,
  bootstrapAdmin,
  createRole,
  testKubeconfig,
  type Caller,
} from './helpers/fixtures.js';
import { call, startGateway } from './helpers/gateway.js';

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
  kubectl(kubeconfig, ['-n', ns, 'create', 'configmap', 'settings', `--from-literal=where=${kubeconfig}`]);
  kubectl(kubeconfig, ['-n', ns, 'create', 'secret', 'generic', 'token', '--from-literal=value=s3cr3t-value']);
}
t.teardown(() => {
  for (const kubeconfig of [target, targetB]) kubectl(kubeconfig, ['delete', 'namespace', ns, '--wait=false']);
});

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

t.test("an admin's agent: the read tools, on two clusters", async (t) => {
  const client = await agent(admin);
  const tools = (await client.listTools()).tools;
  t.same(
    tools.map((x) => x.name).sort(),
    ['describe_resource', 'get_resource', 'list_clusters', 'list_resources'],
    'the read tools',
  );
  t.ok(
    tools.every((x) => x.annotations?.readOnlyHint === true),
    'each says it only reads',
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

t.test('refused: anonymous, a session cookie, a deleted key; GET /mcp is 405', async (t) => {
  const anonymous = new Client({ name: 'anon', version: '1' });
  await t.rejects(
    anonymous.connect(new StreamableHTTPClientTransport(new URL(`${gw.url}/mcp`))),
    'anonymous: the connection is refused',
  );
  const initialize = {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  };
  const headers = { accept: 'application/json, text/event-stream' };
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
  t.equal(get.headers.get('allow'), 'POST');

  const key = await apiKeyWithRoles(gw, admin, 'mcp-doomed', ['viewer']);
  const client = await agent(key);
  t.notOk((await tool(client, 'list_clusters')).isError);
  const keys = await call(gw.url, 'GET', '/api/v1/admin/apikeys/', { headers: admin.headers });
  const id = keys.body.apiKeys.find((k: { name: string }) => k.name === 'mcp-doomed').id;
  t.equal((await call(gw.url, 'DELETE', `/api/v1/admin/apikeys/${id}`, { headers: admin.headers })).status, 200);
  await eventually('the deleted key refused', async () =>
    client.callTool({ name: 'list_clusters', arguments: {} }).then(
      () => false,
      (err: Error) => /401|Unauthorized/i.test(err.message),
    ),
  );
  t.pass('a deleted key ends the agent');
});
