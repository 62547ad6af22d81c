// The auth_token cookie: reading it from the Cookie header and writing Set-Cookie values
// (HttpOnly, SameSite=Lax, Path=/, Secure behind https). Plain headers, no cookie plugin needed.
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

export function sessionCookie(token: string, maxAgeSeconds: number, secure: boolean): string {
  return (
    `${SESSION_COOKIE}=${token}; Path=/; Max-Age=${maxAgeSeconds}; ` +
    `HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`
  );
}

export function clearedSessionCookie(secure: boolean): string {
  return `${SESSION_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`;
}
