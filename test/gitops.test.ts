// GitOps-managed registration with a real GitOps engine (docs/gitops.md): Flux's source-controller
// and kustomize-controller (built from their Go modules) sync a Git repository served over smart
// HTTP on loopback into the host plane, and kiteline serves what Git declares.
//   - A commit adds a Cluster, its kubeconfig Secret (SOPS-encrypted with age; never plain in the
//     repository), a Role and a User holding it (with its password Secret, encrypted too): Flux
//     applies them, kiteline serves the cluster and the user signs in with the role.
//   - The admin API shows `managedBy` and refuses to change or delete what Flux owns (409 naming the
//     Kustomization); kiteline still writes the Cluster's status.
//   - Commits that change the description, disable and enable, rename onto a taken name (refused)
//     and onto a free one propagate; a change made behind Flux's back is put back by Flux and
//     kiteline follows, with no failed request meanwhile; a commit removing the cluster
//     deregisters it.
//   - Commit-to-served, the median of 5, is printed (docs/benchmarks.md).
import { readFileSync } from 'node:fs';
import t from 'tap';
import { stringify } from 'yaml';
import { kubectl, testControlPlane, uniqueName } from './helpers/clusters.js';
import { bootstrapAdmin, login, withCookie } from './helpers/auth-session.js';
import { eventually } from './helpers/eventually.js';
import { startFlux } from './helpers/flux.js';
import { call, startGateway } from './helpers/gateway.js';
import { startGitServer } from './helpers/git-server.js';

const KUSTOMIZATION = 'kiteline';
const GIT_USER_PASSWORD = 'from-git-password-1';

interface ClusterView {
  id: number;
  name: string;
  description: string;
  enabled: boolean;
  ready: boolean;
  managedBy?: { tool: string; kind: string; namespace: string; name: string };
}

t.test('Flux registers clusters, roles and users from Git; kiteline serves them and leaves them to Git', async (t) => {
  const host = await testControlPlane('host');
  const targetA = await testControlPlane('target-a');
  const targetB = await testControlPlane('target-b');
  const gw = await startGateway(t, { logName: 'gitops' });
  const admin = withCookie(await bootstrapAdmin(gw.url));
  const flux = await startFlux(t, { kubeconfig: host.kubeconfigPath, namespace: uniqueName('flux') });
  const repo = await startGitServer(t, 'fleet');

  const clusters = async (): Promise<ClusterView[]> =>
    (await call(gw.url, 'GET', '/api/v1/admin/clusters', admin)).body;
  const clusterNamed = async (name: string) => (await clusters()).find((c) => c.name === name);
  /** A read through kiteline on the named cluster: the status (200 when served). */
  const readThrough = async (name: string, cookie = admin) =>
    (
      await call(gw.url, 'GET', '/api/v1/namespaces', {
        ...cookie,
        headers: { ...cookie.headers, 'x-cluster-name': name },
        signal: AbortSignal.timeout(10_000),
      })
    ).status;
  const kustomizationStatus = () =>
    kubectl(host.kubeconfigPath, ['-n', flux.namespace, 'get', 'kustomization', KUSTOMIZATION, '-o', 'json']);
  const fluxContext = () => `Kustomization: ${kustomizationStatus().stdout}\nFlux logs:\n${flux.logs().slice(-4000)}`;
  const waitFor = async <T>(what: string, check: () => Promise<T | undefined | false>, ms = 60_000) => {
    try {
      return await eventually(what, check, ms, 200);
    } catch (err) {
      t.comment(fluxContext());
      throw err;
    }
  };

  // A cluster registered through the admin API: the name a commit later tries to take.
  const targetBConfig = readFileSync(targetB.kubeconfigPath, 'utf8');
  const taken = await call(gw.url, 'POST', '/api/v1/admin/clusters/', {
    ...admin,
    body: { name: 'registered-by-api', config: targetBConfig },
  });
  t.equal(taken.status, 201, 'a cluster registered through the admin API');

  // ---- the manifests in Git ----
  const kubeconfigA = readFileSync(targetA.kubeconfigPath, 'utf8');
  const secretOf = (name: string, stringData: Record<string, string>) =>
    flux.encrypt(stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name }, type: 'Opaque', stringData }));
  const clusterOf = (objectName: string, spec: Record<string, unknown>) =>
    stringify({
      apiVersion: 'kiteline.io/v1alpha1',
      kind: 'Cluster',
      metadata: { name: objectName },
      spec: { kubeconfigSecretRef: { name: 'git-a-kubeconfig' }, ...spec },
    });
  const files = {
    'clusters/git-a-kubeconfig.enc.yaml': secretOf('git-a-kubeconfig', { kubeconfig: kubeconfigA }),
    'clusters/git-a.yaml': clusterOf('git-a', { name: 'git-a', description: 'declared in Git' }),
    'access/git-viewer.yaml': stringify({
      apiVersion: 'kiteline.io/v1alpha1',
      kind: 'Role',
      metadata: { name: 'git-viewer' },
      spec: { name: 'git-viewer', clusters: ['git-a'], namespaces: ['*'], resources: ['*'], verbs: ['get', 'list'] },
    }),
    'access/git-dev.yaml': stringify({
      apiVersion: 'kiteline.io/v1alpha1',
      kind: 'User',
      metadata: { name: 'git-dev' },
      spec: { username: 'git-dev', roles: ['git-viewer'], passwordSecretRef: { name: 'git-dev-password' } },
    }),
    'access/git-dev-password.enc.yaml': secretOf('git-dev-password', { password: GIT_USER_PASSWORD }),
  };
  repo.commit(files, 'kiteline: cluster git-a, role git-viewer, user git-dev');

  // What `flux bootstrap` and `flux create source git` / `kustomization` make, applied once.
  const sync = [
    {
      apiVersion: 'source.toolkit.fluxcd.io/v1',
      kind: 'GitRepository',
      metadata: { name: 'fleet', namespace: flux.namespace },
      spec: { interval: '2s', url: repo.url, ref: { branch: 'main' } },
    },
    {
      apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
      kind: 'Kustomization',
      metadata: { name: KUSTOMIZATION, namespace: flux.namespace },
      spec: {
        interval: '5s',
        sourceRef: { kind: 'GitRepository', name: 'fleet' },
        path: './',
        prune: true,
        targetNamespace: gw.namespace,
        decryption: { provider: 'sops', secretRef: { name: 'sops-age' } },
      },
    },
  ];
  const applied = kubectl(host.kubeconfigPath, ['apply', '-f', '-'], sync.map((d) => stringify(d)).join('---\n'));
  t.equal(applied.status, 0, `the GitRepository and Kustomization are applied ${applied.stderr}`);

  await t.test('Flux applies the commit and kiteline serves the cluster', async (t) => {
    const cluster = await waitFor('git-a to be served', async () => {
      const c = await clusterNamed('git-a');
      return c?.ready ? c : undefined;
    });
    t.equal(cluster.description, 'declared in Git');
    t.same(cluster.managedBy, { tool: 'flux', kind: 'Kustomization', namespace: flux.namespace, name: KUSTOMIZATION });
    t.equal(await readThrough('git-a'), 200, 'a read through kiteline reaches the cluster from Git');
    const cr = JSON.parse(
      kubectl(host.kubeconfigPath, [
        '-n',
        gw.namespace,
        'get',
        'clusters.kiteline.io',
        'git-a',
        '-o',
        'json',
        '--show-managed-fields',
      ]).stdout,
    );
    t.equal(cr.status?.ready, true, 'kiteline writes the status of an object Flux owns');
    t.ok(
      (cr.metadata.managedFields as { manager: string }[]).some((f) => f.manager === 'kustomize-controller'),
      'Flux applied it (its field manager)',
    );
    const secret = JSON.parse(
      kubectl(host.kubeconfigPath, ['-n', gw.namespace, 'get', 'secret', 'git-a-kubeconfig', '-o', 'json']).stdout,
    );
    t.equal(
      Buffer.from(secret.data.kubeconfig, 'base64').toString(),
      kubeconfigA,
      'kustomize-controller decrypted the Secret with the age key in the host cluster',
    );

    // Failed logins count towards a lockout: sign in once the user and its password Secret are seen.
    await waitFor('git-dev and its role to be listed', async () => {
      const users = (await call(gw.url, 'GET', '/api/v1/admin/users/', admin)).body.users as { username: string }[];
      return users.some((u) => u.username === 'git-dev');
    });
    const devCookie = await eventually(
      'git-dev to sign in',
      () => login(gw.url, 'git-dev', GIT_USER_PASSWORD).catch(() => undefined),
      5000,
      1000,
    );
    const me = await call(gw.url, 'GET', '/api/auth/user', withCookie(devCookie));
    t.same(
      me.body.user.roles.map((r: { name: string }) => r.name),
      ['git-viewer'],
      'the user from Git holds the role from Git',
    );
    const visible = await call(gw.url, 'GET', '/api/v1/clusters', withCookie(devCookie));
    t.same(
      visible.body.map((c: { name: string }) => c.name),
      ['git-a'],
      "the role's clusters are all the user sees",
    );
    t.equal(await readThrough('git-a', withCookie(devCookie)), 200, 'and it reads there');
    t.equal(await readThrough('registered-by-api', withCookie(devCookie)), 404, 'not elsewhere (not even shown)');
    const password = JSON.parse(
      kubectl(host.kubeconfigPath, ['-n', gw.namespace, 'get', 'secret', 'git-dev-password', '-o', 'json']).stdout,
    );
    t.ok(password.data.password, 'the password Secret Flux owns is left as Git has it (no rewrite to fight over)');
  });

  await t.test('no plaintext kubeconfig or password is ever in the repository', async (t) => {
    const history = repo.history();
    const token = /^\s*token: (\S+)$/m.exec(kubeconfigA)![1];
    t.notOk(history.includes(token.slice(0, 24)), "no part of the cluster's token");
    t.notOk(history.includes('certificate-authority-data'), 'not even a field name: stringData is encrypted whole');
    t.notOk(history.includes(GIT_USER_PASSWORD), 'no password');
    t.match(history, /ENC\[AES256_GCM,data:/, 'the values are SOPS ciphertext');
    t.match(history, new RegExp(flux.ageRecipient), 'for the age recipient in the host cluster');
  });

  await t.test('the admin API leaves what Flux owns to Git: 409 naming the owner, nothing changed', async (t) => {
    const owner = new RegExp(`managed by GitOps \\(Flux Kustomization ${flux.namespace}/${KUSTOMIZATION}\\)`);
    const cluster = (await clusterNamed('git-a'))!;
    const edit = await call(gw.url, 'PUT', `/api/v1/admin/clusters/${cluster.id}`, {
      ...admin,
      body: { description: 'edited by an admin' },
    });
    t.equal(edit.status, 409, 'a cluster change');
    t.match(edit.body.error, owner);
    const makeDefault = await call(gw.url, 'PUT', `/api/v1/admin/clusters/${cluster.id}`, {
      ...admin,
      body: { isDefault: true },
    });
    t.equal(makeDefault.status, 409, 'even making it the default (isDefault is in Git)');
    const del = await call(gw.url, 'DELETE', `/api/v1/admin/clusters/${cluster.id}`, admin);
    t.equal(del.status, 409, 'a cluster delete');
    t.equal((await clusterNamed('git-a'))?.description, 'declared in Git', 'the cluster is as Git has it');

    const roles = (await call(gw.url, 'GET', '/api/v1/admin/roles/', admin)).body.roles as {
      id: number;
      name: string;
      managedBy?: object;
    }[];
    const role = roles.find((r) => r.name === 'git-viewer')!;
    t.match(role.managedBy, { tool: 'flux', name: KUSTOMIZATION }, 'the role shows its owner');
    t.equal(roles.find((r) => r.name === 'admin')?.managedBy, undefined, 'a role of kiteline shows none');
    const roleEdit = await call(gw.url, 'PUT', `/api/v1/admin/roles/${role.id}`, { ...admin, body: { verbs: ['*'] } });
    t.equal(roleEdit.status, 409, 'a role change');
    t.match(roleEdit.body.error, owner);
    t.equal((await call(gw.url, 'DELETE', `/api/v1/admin/roles/${role.id}`, admin)).status, 409, 'a role delete');
    const groupAssign = await call(gw.url, 'POST', `/api/v1/admin/roles/${role.id}/assign`, {
      ...admin,
      body: { subjectType: 'group', subject: 'ldap/ops' },
    });
    t.equal(groupAssign.status, 409, 'a group assignment (kept on the role)');
    t.match(groupAssign.body.error, owner);

    const users = (await call(gw.url, 'GET', '/api/v1/admin/users/', admin)).body.users as {
      id: number;
      username: string;
      managedBy?: object;
    }[];
    const dev = users.find((u) => u.username === 'git-dev')!;
    t.match(dev.managedBy, { tool: 'flux', kind: 'Kustomization' }, 'the user shows its owner');
    const adminRole = roles.find((r) => r.name === 'admin')!;
    const assign = await call(gw.url, 'POST', `/api/v1/admin/roles/${adminRole.id}/assign`, {
      ...admin,
      body: { subjectType: 'user', subject: 'git-dev' },
    });
    t.equal(assign.status, 409, "giving a Git user a role (its roles are in Git): the user's owner is named");
    t.match(assign.body.error, /user "git-dev" is managed by GitOps/);
    t.equal((await call(gw.url, 'DELETE', `/api/v1/admin/users/${dev.id}`, admin)).status, 409, 'a user delete');
    const disable = await call(gw.url, 'POST', `/api/v1/admin/users/${dev.id}/enable`, {
      ...admin,
      body: { enabled: false },
    });
    t.equal(disable.status, 409, "disabling (spec.enabled is Git's)");
    const reset = await call(gw.url, 'POST', `/api/v1/admin/users/${dev.id}/reset_password`, {
      ...admin,
      body: { password: 'reset-by-admin-1' },
    });
    t.equal(reset.status, 409, 'a password reset (its Secret is in Git)');
    t.match(reset.body.error, /the password of user "git-dev" is managed by GitOps/);
    const cr = JSON.parse(
      kubectl(host.kubeconfigPath, ['-n', gw.namespace, 'get', 'users.kiteline.io', 'git-dev', '-o', 'json']).stdout,
    );
    t.same(cr.spec.roles, ['git-viewer'], 'the user is as Git has it');
    t.not(cr.spec.enabled, false);
  });

  await t.test('commits that change the cluster propagate; a rename onto a taken name is refused', async (t) => {
    repo.commit(
      { 'clusters/git-a.yaml': clusterOf('git-a', { name: 'git-a', description: 'changed in Git', enabled: false }) },
      'git-a: new description, disabled',
    );
    const disabled = await waitFor('the description and the disable', async () => {
      const c = await clusterNamed('git-a');
      return c && c.description === 'changed in Git' && !c.enabled ? c : undefined;
    });
    t.equal(disabled.enabled, false);
    t.not(await readThrough('git-a'), 200, 'a disabled cluster is not served');

    repo.commit(
      { 'clusters/git-a.yaml': clusterOf('git-a', { name: 'git-a', description: 'changed in Git' }) },
      'git-a: enabled again',
    );
    await waitFor('git-a served again', async () => (await readThrough('git-a')) === 200);
    t.pass('enabled again by a commit');

    repo.commit(
      { 'clusters/git-a.yaml': clusterOf('git-a', { name: 'registered-by-api', description: 'changed in Git' }) },
      'git-a: renamed onto a taken name',
    );
    const conflict = await waitFor('the NameConflict in the status', async () => {
      const cr = JSON.parse(
        kubectl(host.kubeconfigPath, ['-n', gw.namespace, 'get', 'clusters.kiteline.io', 'git-a', '-o', 'json']).stdout,
      );
      return (cr.status?.conditions as { type: string; message: string }[] | undefined)?.find(
        (c) => c.type === 'NameConflict',
      );
    });
    t.match(conflict.message, /the name "registered-by-api" is served by/, 'the rename is refused in the status');
    const holder = (await clusters()).filter((c) => c.name === 'registered-by-api');
    t.equal(holder.filter((c) => c.managedBy === undefined).length, 1, 'the API-registered cluster keeps its name');
    t.equal(await readThrough('registered-by-api'), 200, 'and is served');

    repo.commit(
      { 'clusters/git-a.yaml': clusterOf('git-a', { name: 'git-renamed', description: 'changed in Git' }) },
      'git-a: renamed to git-renamed',
    );
    await waitFor('the rename onto a free name', async () => (await readThrough('git-renamed')) === 200);
    t.equal(await readThrough('git-a'), 404, 'the old name is gone');
  });

  await t.test("a change behind Flux's back is put back; kiteline follows without a failed request", async (t) => {
    let failures = 0;
    let requests = 0;
    let reading = true;
    const reader = (async () => {
      while (reading) {
        requests++;
        const status = await readThrough('git-renamed').catch(() => 0);
        if (status !== 200) failures++;
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const crOf = () =>
      JSON.parse(
        kubectl(host.kubeconfigPath, ['-n', gw.namespace, 'get', 'clusters.kiteline.io', 'git-a', '-o', 'json']).stdout,
      );
    const patched = kubectl(host.kubeconfigPath, [
      '-n',
      gw.namespace,
      'patch',
      'clusters.kiteline.io',
      'git-a',
      '--type=merge',
      '-p',
      '{"spec":{"description":"edited with kubectl"}}',
      '-o',
      'json',
    ]);
    t.equal(patched.status, 0, 'kubectl changes the cluster behind Flux');
    const patchedGeneration = JSON.parse(patched.stdout).metadata.generation as number;
    const started = Date.now();
    const reverted = await waitFor("Flux to put Git's description back and kiteline to observe it", async () => {
      const cr = crOf();
      return cr.metadata.generation > patchedGeneration &&
        cr.spec.description === 'changed in Git' &&
        cr.status?.observedGeneration >= cr.metadata.generation
        ? cr
        : undefined;
    });
    t.equal(reverted.spec.description, 'changed in Git', 'Flux put it back');
    t.equal((await clusterNamed('git-renamed'))?.description, 'changed in Git', 'the admin API shows Git again');
    t.comment(`drift put back by Flux and observed by kiteline ${Date.now() - started} ms after the kubectl patch`);
    await new Promise((r) => setTimeout(r, 1000)); // and a while after it
    reading = false;
    await reader;
    t.ok(requests >= 5, `reads ran throughout (${requests})`);
    t.equal(failures, 0, 'no read failed: serving did not flap');
  });

  await t.test('commit to served: the median of 5', async (t) => {
    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      const name = `git-m${i}`;
      const pushed = performance.now();
      repo.commit({ [`clusters/${name}.yaml`]: clusterOf(name, { name }) }, `add ${name}`);
      await waitFor(`${name} to be served`, async () => (await readThrough(name)) === 200);
      times.push(performance.now() - pushed);
      repo.commit({ [`clusters/${name}.yaml`]: null }, `remove ${name}`);
      await waitFor(`${name} to be gone`, async () => (await readThrough(name)) === 404);
    }
    const sorted = [...times].sort((a, b) => a - b);
    t.comment(
      `commit-to-served (GitRepository interval 2s): median ${Math.round(sorted[2])} ms, ` +
        `all ${sorted.map((ms) => Math.round(ms)).join(', ')} ms`,
    );
    t.equal(times.length, 5);
  });

  await t.test('a commit that removes the cluster deregisters it', async (t) => {
    repo.commit({ 'clusters/git-a.yaml': null, 'clusters/git-a-kubeconfig.enc.yaml': null }, 'remove cluster git-a');
    await waitFor('git-a to be deregistered', async () => (await clusterNamed('git-renamed')) === undefined);
    t.equal(await readThrough('git-renamed'), 404, 'no longer served');
    const secret = kubectl(host.kubeconfigPath, ['-n', gw.namespace, 'get', 'secret', 'git-a-kubeconfig']);
    t.not(secret.status, 0, 'Flux pruned its Secret too');
    t.ok(await clusterNamed('registered-by-api'), 'the API-registered cluster stays');
  });
});
