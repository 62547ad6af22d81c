// The auth_token cookie: reading it from the Cookie header and writing Set-Cookie values
// (HttpOnly, SameSite=Lax, Secure behind https, Path = kiteline's base path: a host's other
// applications under other paths never receive it). Plain headers, no cookie plugin needed.
export const SESSION_COOKIE = 'auth_token';

export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) {
      const value = part.slice(eq + 1).trim();
      try {
        return decodeURIComponent(value);
      } catch {
        return value;
      }
    }
  }
  return undefined;
}

/** The cookie attributes after the value: `basePath` is config.basePath ('' at the root). */
export function cookieAttributes(path: string, maxAgeSeconds: number, secure: boolean): string {
  return `Path=${path || '/'}; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`;
}

export function sessionCookie(token: string, maxAgeSeconds: number, secure: boolean, basePath: string): string {
  return `${SESSION_COOKIE}=${token}; ${cookieAttributes(basePath, maxAgeSeconds, secure)}`;
}

/**
 * The Set-Cookie values that end the browser's session: under a base path, also one at `/` (a
 * session cookie set before the base path was, e.g. by an upgrade, would outlive the logout).
 */
export function clearedSessionCookies(secure: boolean, basePath: string): string[] {
  const cleared = [`${SESSION_COOKIE}=; ${cookieAttributes(basePath, 0, secure)}`];
  if (basePath !== '') cleared.push(`${SESSION_COOKIE}=; ${cookieAttributes('', 0, secure)}`);
  return cleared;
}
