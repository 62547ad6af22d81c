// Sets the gateway up over HTTP the way a user does: create_super_user, password login, an admin
// API key, and the target cluster registered from its kubeconfig.
export interface GatewayAnswer {
  status: number;
  body: any;
  headers: Headers;
}

export async function callGateway(
  base: string,
  method: string,
  path: string,
  options: { body?: unknown; headers?: Record<string, string> } = {},
): Promise<GatewayAnswer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(base + path, {
    method,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    /* not JSON */
  }
  return { status: res.status, body, headers: res.headers };
}

async function expectStatus(what: string, answer: Promise<GatewayAnswer>, status: number): Promise<GatewayAnswer> {
  const a = await answer;
  if (a.status !== status) throw new Error(`${what}: expected ${status}, got ${a.status} ${JSON.stringify(a.body)}`);
  return a;
}

/** Retries `attempt` every 100 ms until it returns a value. */
export async function until<T>(
  what: string,
  attempt: () => Promise<T | undefined>,
  timeoutMs = 60_000,
  everyMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await attempt();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** The first user that bootstrapAdmin creates (the soak also logs in with it). */
export const ADMIN = { username: 'admin', password: 'bench-password-1' };

/** First user, a login, and an admin API key; returns the key. */
export async function bootstrapAdmin(base: string): Promise<string> {
  await expectStatus(
    'create_super_user',
    callGateway(base, 'POST', '/api/v1/admin/users/create_super_user', { body: { ...ADMIN, name: 'Admin' } }),
    201,
  );
  const login = await expectStatus(
    'login',
    callGateway(base, 'POST', '/api/auth/login/password', { body: ADMIN }),
    204,
  );
  const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0];
  const key = await until('the admin API key', async () => {
    const res = await callGateway(base, 'POST', '/api/v1/admin/apikeys/', {
      body: { name: 'bench', roles: ['admin'] },
      headers: { cookie },
    });
    return res.status === 201 ? (res.body.key as string) : undefined;
  });
  await until('the API key to work', async () =>
    (await callGateway(base, 'GET', '/api/v1/clusters', { headers: { authorization: key } })).status === 200
      ? true
      : undefined,
  );
  return key;
}

/** Registers a cluster from a kubeconfig and waits until the gateway says it is ready. */
export async function registerCluster(base: string, key: string, name: string, kubeconfig: string): Promise<void> {
  await expectStatus(
    `register ${name}`,
    callGateway(base, 'POST', '/api/v1/admin/clusters/', {
      body: { name, config: kubeconfig, isDefault: true },
      headers: { authorization: key },
    }),
    201,
  );
  await until(`cluster ${name} ready`, async () => {
    const res = await callGateway(base, 'GET', '/api/v1/clusters', { headers: { authorization: key } });
    return res.status === 200 &&
      (res.body as Array<{ name: string; ready: boolean }>).some((c) => c.name === name && c.ready)
      ? true
      : undefined;
  });
}

/** How many registered clusters the admin API shows ready. */
export async function readyClusterCount(base: string, key: string): Promise<number> {
  const res = await callGateway(base, 'GET', '/api/v1/admin/clusters/', { headers: { authorization: key } });
  if (res.status !== 200) return -1;
  const list = (Array.isArray(res.body) ? res.body : (res.body?.clusters ?? [])) as Array<{ ready: boolean }>;
  return list.filter((c) => c.ready).length;
}
