// A real OpenID Provider for the tests: `oidc-provider` (a certified OpenID Provider implementation)
// run in the test process on loopback, with one confidential client, test accounts whose claims
// (groups included) a test may change, and a front proxy on the issuer's port that can tamper with
// the ID tokens it hands out. Also a small "browser" that walks the provider's sign-in pages (its
// development login and consent forms) with a cookie jar, up to the redirect back to kiteline.
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateKeyPairSync } from 'node:crypto';
import Provider from 'oidc-provider';

export interface TestAccount {
  preferred_username?: string;
  email?: string;
  email_verified?: boolean;
  name?: string;
  groups?: string[];
}

export interface TestOidcProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** Accounts by sub (the login typed on the provider's form); change them between sign-ins. */
  accounts: Map<string, TestAccount>;
  /** When set, the proxy rewrites each token answer's ID token with it (the signature is kept). */
  tamper?: (payload: Record<string, unknown>) => Record<string, unknown>;
  /** A new signing key (the old one is no longer published): a key rotation. */
  rotateKeys(): void;
  close(): Promise<void>;
}

function signingKey(): Record<string, unknown> {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return {
    ...privateKey.export({ format: 'jwk' }),
    kid: `k-${Date.now()}-${Math.random().toString(36).slice(2)}`,
    use: 'sig',
    alg: 'ES256',
  };
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

/** Starts the provider for a client whose redirect URI is `redirectUri`. */
export async function startOidcProvider(redirectUri: string): Promise<TestOidcProvider> {
  const accounts = new Map<string, TestAccount>();
  const clientId = 'kiteline';
  const clientSecret = `secret-${Math.random().toString(36).slice(2)}`;
  const front = createServer();
  const frontPort = await listen(front);
  const issuer = `http://127.0.0.1:${frontPort}`;

  let handler!: ReturnType<Provider['callback']>;
  const back = createServer((req, res) => void handler(req, res));
  const backPort = await listen(back);

  const build = (keys: Record<string, unknown>[]) =>
    new Provider(issuer, {
      clients: [
        {
          client_id: clientId,
          client_secret: clientSecret,
          redirect_uris: [redirectUri],
          grant_types: ['authorization_code'],
          response_types: ['code'],
          token_endpoint_auth_method: 'client_secret_post',
          id_token_signed_response_alg: 'ES256',
        },
      ],
      jwks: { keys },
      cookies: { keys: ['test-cookie-key'] },
      claims: {
        openid: ['sub'],
        profile: ['preferred_username', 'name'],
        email: ['email', 'email_verified'],
        groups: ['groups'],
      },
      scopes: ['openid', 'profile', 'email', 'groups'],
      // The ID token carries every granted claim (groups included), not only those userinfo lacks.
      conformIdTokenClaims: false,
      pkce: { required: () => true },
      findAccount: (_ctx, sub) => {
        const account = accounts.get(sub);
        if (!account) return undefined;
        return { accountId: sub, claims: () => ({ sub, ...accounts.get(sub) }) };
      },
      features: { devInteractions: { enabled: true } },
    });
  handler = build([signingKey()]).callback();

  const state: TestOidcProvider = {
    issuer,
    clientId,
    clientSecret,
    accounts,
    rotateKeys() {
      handler = build([signingKey()]).callback();
    },
    async close() {
      front.closeAllConnections();
      back.closeAllConnections();
      await Promise.all([front, back].map((s) => new Promise((resolve) => s.close(resolve))));
    },
  };

  // The front proxy: everything goes to the provider; token answers may be tampered with.
  front.on('request', (req: IncomingMessage, res) => {
    const upstream = httpRequest(
      { host: '127.0.0.1', port: backPort, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        const tamper = state.tamper;
        if (!tamper || !req.url?.startsWith('/token')) {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
          return;
        }
        const chunks: Buffer[] = [];
        answer.on('data', (c: Buffer) => chunks.push(c));
        answer.on('end', () => {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
          if (typeof body.id_token === 'string') {
            const [header, payload, signature] = body.id_token.split('.');
            const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
            body.id_token = [header, Buffer.from(JSON.stringify(tamper(claims))).toString('base64url'), signature].join(
              '.',
            );
          }
          const text = JSON.stringify(body);
          const headers = { ...answer.headers, 'content-length': String(Buffer.byteLength(text)) };
          res.writeHead(answer.statusCode ?? 502, headers);
          res.end(text);
        });
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  return state;
}

/** A cookie jar for one origin, minding cookie paths and deletions. */
class CookieJar {
  private readonly cookies = new Map<string, { value: string; path: string }>();

  store(headers: Headers): void {
    for (const line of headers.getSetCookie()) {
      const [pair, ...attributes] = line.split(';').map((s) => s.trim());
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq);
      const value = pair.slice(eq + 1);
      const path = attributes.find((a) => /^path=/i.test(a))?.slice(5) || '/';
      const gone = attributes.some((a) => /^max-age=0$/i.test(a) || /^expires=.*1970/i.test(a)) || value === '';
      const key = `${name}\n${path}`;
      if (gone) this.cookies.delete(key);
      else this.cookies.set(key, { value, path });
    }
  }

  header(path: string): string {
    return [...this.cookies.entries()]
      .filter(([, c]) => path === c.path || path.startsWith(c.path.endsWith('/') ? c.path : `${c.path}/`))
      .map(([key, c]) => `${key.split('\n')[0]}=${c.value}`)
      .join('; ');
  }
}

/**
 * Walks the provider's pages from `authUrl` as a browser would, signing in as `login`, and returns
 * the URL the provider finally sends the browser to (kiteline's callback with code and state).
 */
export async function signInAtProvider(authUrl: string, login: string, callbackPrefix: string): Promise<string> {
  const jar = new CookieJar();
  let url = authUrl;
  let method = 'GET';
  let body: string | undefined;
  for (let step = 0; step < 20; step++) {
    if (url.startsWith(callbackPrefix)) return url;
    const target = new URL(url);
    const res = await fetch(url, {
      method,
      redirect: 'manual',
      headers: {
        cookie: jar.header(target.pathname),
        ...(body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
      body,
    });
    jar.store(res.headers);
    const location = res.headers.get('location');
    if (res.status >= 300 && res.status < 400 && location) {
      url = new URL(location, url).href;
      method = 'GET';
      body = undefined;
      continue;
    }
    const html = await res.text();
    const form = /<form[^>]*action="([^"]+)"[^>]*method="post"[^>]*>([\s\S]*?)<\/form>/i.exec(html);
    if (res.status !== 200 || !form) throw new Error(`unexpected page at ${url}: ${res.status} ${html.slice(0, 300)}`);
    const fields = new URLSearchParams();
    for (const input of form[2].matchAll(/<input[^>]*name="([^"]+)"[^>]*>/g)) {
      const value = /value="([^"]*)"/.exec(input[0])?.[1] ?? '';
      fields.set(input[1], value);
    }
    if (fields.has('login')) {
      fields.set('login', login);
      fields.set('password', 'any-password');
    }
    url = new URL(form[1], url).href;
    method = 'POST';
    body = fields.toString();
  }
  throw new Error('the sign-in at the provider did not end');
}
