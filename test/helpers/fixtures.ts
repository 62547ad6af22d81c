// Set-up shared by tests that need a signed-in caller and registered target clusters, done the
// way users do it: create_super_user, an API key, POST /api/v1/admin/clusters/ with the target's
// kubeconfig, then wait until GET /api/v1/clusters shows it ready.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { login } from './auth-session.js';
import { TEST_DIR, type TestClusterName } from './clusters.js';
import { eventually } from './eventually.js';
import { call, type HttpResponse, type TestGateway } from './gateway.js';

export interface Caller {
  /** The API key (send as Authorization). */
  key: string;
  /** Headers that authenticate as this caller. */
  headers: Record<string, string>;
}

export interface ClusterRegistration {
  name: string;
  /** kubeconfig YAML text (token auth, inline CA). */
  config: string;
  isDefault?: boolean;
  impersonate?: boolean;
  enabled?: boolean;
}

function ensure(res: HttpResponse, expected: number, what: string): HttpResponse {
  if (res.status !== expected) throw new Error(`${what}: expected ${expected}, got ${res.status} ${res.text}`);
  return res;
}

/** The kubeconfig YAML of a shared test cluster. */
export function testKubeconfig(name: TestClusterName): string {
  return readFileSync(join(TEST_DIR, name, 'kubeconfig'), 'utf8');
}

/** Waits until the API key authenticates on this gateway (the caches have seen it). */
async function usable(gw: TestGateway, headers: Record<string, string>): Promise<void> {
  await eventually(
    'the API key to authenticate',
    async () => (await call(gw.url, 'GET', '/api/v1/clusters', { headers })).status === 200,
    30_000,
    100,
  );
}

/** Creates the first super user and an admin API key. */
export async function bootstrapAdmin(gw: TestGateway, username = 'admin'): Promise<Caller> {
  ensure(
    await call(gw.url, 'POST', '/api/v1/admin/users/create_super_user', {
      body: { username, password: 'correct-horse-battery', name: 'Admin' },
    }),
    201,
    'create_super_user',
  );
  // The super user's session is not needed: log in once to create the admin key.
  const login = await call(gw.url, 'POST', '/api/auth/login/password', {
    body: { username, password: 'correct-horse-battery' },
  });
  ensure(login, 204, 'login');
  const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0];
  const created = await eventually(
    'the admin key',
    async () => {
      const res = await call(gw.url, 'POST', '/api/v1/admin/apikeys/', {
        body: { name: `${username}-key`, roles: ['admin'] },
        headers: { cookie },
      });
      return res.status === 201 ? res : undefined;
    },
    60_000,
    200,
  );
  const caller = { key: created.body.key as string, headers: { authorization: created.body.key as string } };
  await usable(gw, caller.headers);
  return caller;
}

/** Creates a Role through the admin API. */
export async function createRole(
  gw: TestGateway,
  admin: Caller,
  role: { name: string; clusters: string[]; namespaces: string[]; resources: string[]; verbs: string[] },
): Promise<void> {
  ensure(
    await call(gw.url, 'POST', '/api/v1/admin/roles/', { body: role, headers: admin.headers }),
    201,
    `create role ${role.name}`,
  );
}

/** Creates an API key holding the given roles and waits until it works. */
export async function apiKeyWithRoles(gw: TestGateway, admin: Caller, name: string, roles: string[]): Promise<Caller> {
  const res = await eventually(
    `API key ${name}`,
    async () => {
      const r = await call(gw.url, 'POST', '/api/v1/admin/apikeys/', { body: { name, roles }, headers: admin.headers });
      if (r.status === 400 && /unknown role/.test(r.text)) return undefined; // the role is not in the cache yet
      return ensure(r, 201, `create API key ${name}`);
    },
    30_000,
    100,
  );
  const caller = { key: res.body.key as string, headers: { authorization: res.body.key as string } };
  await usable(gw, caller.headers);
  return caller;
}

/** Registers a cluster (201) and returns its id. */
export async function registerCluster(gw: TestGateway, admin: Caller, cluster: ClusterRegistration): Promise<number> {
  const res = ensure(
    await call(gw.url, 'POST', '/api/v1/admin/clusters/', { body: cluster, headers: admin.headers }),
    201,
    `register cluster ${cluster.name}`,
  );
  return res.body.id as number;
}

/** Waits until GET /api/v1/clusters shows the cluster ready. */
export async function waitClusterReady(
  gw: TestGateway,
  caller: Caller,
  name: string,
  timeoutMs = 60_000,
): Promise<void> {
  await eventually(
    `cluster ${name} to be ready`,
    async () => {
      const res = await call<Array<{ name: string; ready: boolean }>>(gw.url, 'GET', '/api/v1/clusters', {
        headers: caller.headers,
      });
      return res.status === 200 && res.body.some((c) => c.name === name && c.ready);
    },
    timeoutMs,
    200,
  );
}

/** Registers a cluster and waits until it serves requests. */
export async function addReadyCluster(gw: TestGateway, admin: Caller, cluster: ClusterRegistration): Promise<number> {
  const id = await registerCluster(gw, admin, cluster);
  await waitClusterReady(gw, admin, cluster.name);
  return id;
}

/** A password user holding `roles`, signed in: its session cookie. */
export async function signedInUser(gw: TestGateway, admin: Caller, username: string, roles: string[]): Promise<string> {
  const created = await call(gw.url, 'POST', '/api/v1/admin/users/', {
    headers: admin.headers,
    body: { username, password: `${username}-password-1`, name: username },
  });
  if (created.status !== 201) throw new Error(`user ${username}: ${created.status} ${created.text}`);
  for (const role of roles) {
    const listed = await call(gw.url, 'GET', '/api/v1/admin/roles/', { headers: admin.headers });
    const id = listed.body.roles.find((r: { name: string }) => r.name === role).id;
    await eventually(`${username} to hold ${role}`, async () => {
      const res = await call(gw.url, 'POST', `/api/v1/admin/roles/${id}/assign`, {
        headers: admin.headers,
        body: { subjectType: 'user', subject: username },
      });
      return res.status < 300;
    });
  }
  return login(gw.url, username, `${username}-password-1`);
}
