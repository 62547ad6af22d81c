// A sign-in at kiteline through a test OpenID Provider (./oidc-provider.ts), step by step: start it
// at kiteline, walk the provider's pages as one of its accounts, hand the answer back to kiteline's
// callback, and read where kiteline sent the browser (and the session cookie, if any).
import { call, type TestGateway } from './gateway.js';
import { signInAtProvider } from './oidc-provider.js';

export interface SignInAttempt {
  /** kiteline's callback URL as the provider sent the browser there, and the flow cookie. */
  callback: string;
  flowCookie: string;
}

export interface SignInResult {
  status: number;
  location: string;
  /** `auth_token=...` when kiteline opened a session. */
  cookie?: string;
}

/** Starts a sign-in with the provider `provider` at kiteline and walks the provider's pages as `login` (a sub). */
export async function attemptSignIn(
  gw: Pick<TestGateway, 'url'>,
  login: string,
  provider: string,
): Promise<SignInAttempt> {
  const started = await call(gw.url, 'GET', `/api/auth/login?provider=${provider}`);
  if (started.status !== 200) throw new Error(`login start: ${started.status} ${started.text}`);
  const flowCookie = /kiteline_oidc=[^;]+/.exec(started.headers.get('set-cookie') ?? '')![0];
  const callback = await signInAtProvider(started.body.auth_url, login, `${gw.url}/api/auth/callback`);
  return { callback, flowCookie };
}

/** Hands the provider's answer to kiteline. */
export async function finishSignIn(attempt: SignInAttempt): Promise<SignInResult> {
  const res = await fetch(attempt.callback, { redirect: 'manual', headers: { cookie: attempt.flowCookie } });
  const session = /auth_token=([^;]+)/.exec(res.headers.getSetCookie().join('\n'));
  return {
    status: res.status,
    location: res.headers.get('location') ?? '',
    ...(session ? { cookie: `auth_token=${session[1]}` } : {}),
  };
}

/** The whole sign-in of `login` with `provider`. */
export async function oidcSignIn(gw: Pick<TestGateway, 'url'>, login: string, provider: string): Promise<SignInResult> {
  return finishSignIn(await attemptSignIn(gw, login, provider));
}

/** The `error` kiteline's redirect to its login page carries (null: signed in). */
export function signInError(result: SignInResult): string | null {
  return new URL(result.location, 'http://x').searchParams.get('error');
}
