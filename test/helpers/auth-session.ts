// Test helpers for users and sessions: bootstrap the super user and log in (returns the Cookie
// header to send). To wait for what another writer (kubectl, a replica) causes: ./eventually.ts.
import { call } from './gateway.js';

export const ADMIN = { username: 'admin', password: 'admin-password-1', name: 'The Admin' };

/** Logs in; returns the Cookie header value carrying the session. Throws when login fails. */
export async function login(base: string, username: string, password: string): Promise<string> {
  const res = await call(base, 'POST', '/api/auth/login/password', { body: { username, password } });
  if (res.status !== 204) throw new Error(`login of ${username} failed: ${res.status} ${res.text}`);
  const setCookie = res.headers.get('set-cookie') ?? '';
  const match = /auth_token=([^;]*)/.exec(setCookie);
  if (!match) throw new Error('no auth_token cookie');
  return `auth_token=${match[1]}`;
}

/** Creates the super user (fresh namespace) and returns its session cookie. */
export async function bootstrapAdmin(base: string): Promise<string> {
  const res = await call(base, 'POST', '/api/v1/admin/users/create_super_user', { body: ADMIN });
  if (res.status !== 201) throw new Error(`create_super_user failed: ${res.status} ${res.text}`);
  return login(base, ADMIN.username, ADMIN.password);
}

export const withCookie = (cookie: string) => ({ headers: { cookie } });
