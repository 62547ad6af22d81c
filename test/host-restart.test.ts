// Fault test on a host cluster of the test's own (.kiteline/test/fault-host): its processes are
// SIGKILLed right after a burst of writes and started again on the same ports and data. While it
// is down the gateway serves from its caches (API keys, sessions, admin reads) and refuses writes
// with a clean 503; after it is back the caches re-list and re-watch, logins and keys work, and
// every write acknowledged before the crash is there.
import t from 'tap';
import { login } from './helpers/auth-session.js';
import { kubectl, uniqueName } from './helpers/clusters.js';
import { eventually } from './helpers/eventually.js';
import { callWithin, faultControlPlane, killControlPlane, restartControlPlane } from './helpers/faults.js';
import { bootstrapAdmin } from './helpers/fixtures.js';
import { startGateway } from './helpers/gateway.js';

const PASSWORD = 'correct-horse-battery'; // bootstrapAdmin's
const host = await faultControlPlane(t, 'fault-host');
const gw = await startGateway(t, { kubeconfig: host.kubeconfigPath, logName: 'host-restart' });
const admin = await bootstrapAdmin(gw);
const cookie = await login(gw.url, 'admin', PASSWORD);

const role = (name: string) => ({
  name,
  clusters: ['*'],
  namespaces: ['default'],
  resources: ['configmaps'],
  verbs: ['get'],
});
const roleNames = async (): Promise<string[] | undefined> => {
  const res = await callWithin(gw.url, 'GET', '/api/v1/admin/roles/', { headers: admin.headers });
  return res.status === 200 ? (res.body.roles as Array<{ name: string }>).map((r) => r.name) : undefined;
};
/** Role names in the host cluster itself (what etcd kept). */
const storedRoleNames = (): string[] => {
  const res = kubectl(host.kubeconfigPath, ['-n', gw.namespace, 'get', 'roles.kiteline.io', '-o', 'json']);
  if (res.status !== 0) throw new Error(`kubectl get roles: ${res.stderr}`);
  return (JSON.parse(res.stdout).items as Array<{ metadata: { name: string }; spec: { name?: string } }>).map(
    (r) => r.spec.name ?? r.metadata.name,
  );
};

t.test(
  'the host API server killed and restarted: served from caches while down, nothing lost, caches current after',
  async (t) => {
    // A burst of writes, each acknowledged (201) just before the crash.
    const written: string[] = [];
    for (let i = 0; i < 10; i++) {
      const name = uniqueName('before-crash');
      const res = await callWithin(gw.url, 'POST', '/api/v1/admin/roles/', {
        headers: admin.headers,
        body: role(name),
      });
      t.equal(res.status, 201, `role ${i} acknowledged`);
      written.push(name);
    }
    const user = uniqueName('crash-user');
    t.equal(
      (
        await callWithin(gw.url, 'POST', '/api/v1/admin/users/', {
          headers: admin.headers,
          body: { username: user, password: PASSWORD, name: 'U' },
        })
      ).status,
      201,
      'a user acknowledged',
    );
    await killControlPlane(host);

    // While the host is down: reads and authentication come from the caches.
    const listed = await roleNames();
    t.ok(listed, 'the admin API key still authenticates and lists roles');
    t.same(
      written.filter((n) => !listed?.includes(n)),
      [],
      'the list holds every acknowledged role',
    );
    const me = await callWithin(gw.url, 'GET', '/api/auth/user', { headers: { cookie } });
    t.equal(me.status, 200, `the session still authenticates: ${me.text}`);
    t.equal(
      (await callWithin(gw.url, 'GET', '/api/v1/clusters', { headers: admin.headers })).status,
      200,
      'user routes still answer',
    );
    // Writes fail cleanly: a 503, not acknowledged and then lost, and not a hang.
    const lostName = uniqueName('during-outage');
    const refused = await callWithin(gw.url, 'POST', '/api/v1/admin/roles/', {
      headers: admin.headers,
      body: role(lostName),
    });
    t.equal(refused.status, 503, `a write while the host is down is refused with 503: ${refused.text}`);
    t.match(refused.body, { reason: 'ServiceUnavailable', code: 503, error: String });
    const outageLogin = await callWithin(gw.url, 'POST', '/api/auth/login/password', {
      body: { username: user, password: PASSWORD },
    });
    t.ok(
      [204, 503].includes(outageLogin.status),
      `a login while the host is down answers 204 or 503, never 500 or a hang (${outageLogin.status})`,
    );

    await restartControlPlane(host);

    // Nothing acknowledged was lost, and nothing refused was written.
    const stored = storedRoleNames();
    t.same(
      written.filter((n) => !stored.includes(n)),
      [],
      'every acknowledged role is in the host cluster',
    );
    t.notOk(stored.includes(lostName), 'the refused write is not there');
    const users = kubectl(host.kubeconfigPath, ['-n', gw.namespace, 'get', 'users.kiteline.io', '-o', 'json']);
    t.ok(
      (JSON.parse(users.stdout).items as Array<{ spec: { username: string } }>).some((u) => u.spec.username === user),
      'the acknowledged user is there',
    );

    // The caches re-list and re-watch: a change made with kubectl after the restart shows up...
    const applied = uniqueName('after-restart');
    const cr = { apiVersion: 'kiteline.io/v1alpha1', kind: 'Role', metadata: { name: applied }, spec: role(applied) };
    t.equal(
      kubectl(host.kubeconfigPath, ['-n', gw.namespace, 'apply', '-f', '-'], JSON.stringify(cr)).status,
      0,
      'kubectl apply',
    );
    await eventually(
      'the kubectl-applied role in the gateway',
      async () => (await roleNames())?.includes(applied),
      90_000,
      250,
    );
    t.pass('a role applied with kubectl after the restart is served');
    // ...and so does a deletion.
    const doomed = kubectl(host.kubeconfigPath, ['-n', gw.namespace, 'get', 'roles.kiteline.io', '-o', 'json']);
    const doomedObject = (
      JSON.parse(doomed.stdout).items as Array<{ metadata: { name: string }; spec: { name?: string } }>
    ).find((r) => r.spec.name === written[0]);
    t.ok(doomedObject, 'the first role is stored');
    t.equal(
      kubectl(host.kubeconfigPath, ['-n', gw.namespace, 'delete', 'roles.kiteline.io', doomedObject!.metadata.name])
        .status,
      0,
      'kubectl delete',
    );
    await eventually(
      'the deleted role to leave the gateway',
      async () => {
        const names = await roleNames();
        return names && !names.includes(written[0]);
      },
      30_000,
      250,
    );
    t.pass('a role deleted with kubectl after the restart is gone');

    // Logins, keys and writes work again.
    await eventually(
      'a login after the restart',
      async () =>
        (await callWithin(gw.url, 'POST', '/api/auth/login/password', { body: { username: user, password: PASSWORD } }))
          .status === 204,
      30_000,
      250,
    );
    t.pass('the user logs in');
    t.equal(
      (await callWithin(gw.url, 'GET', '/api/auth/user', { headers: { cookie } })).status,
      200,
      'the old session still works',
    );
    const after = await callWithin(gw.url, 'POST', '/api/v1/admin/roles/', {
      headers: admin.headers,
      body: role(uniqueName('after')),
    });
    t.equal(after.status, 201, `writes work again: ${after.text}`);
  },
);
