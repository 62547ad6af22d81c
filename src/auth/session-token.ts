// Session tokens (the auth_token cookie): "v1.<payload>.<signature>", base64url, signed with
// HMAC-SHA256 under the shared session key. The payload holds the user id, issue and expiry times,
// when a second factor was last proved, whether the session may only enrol one, and a stamp derived
// from the user's password hash and session epoch: resetting the password or bumping the epoch
// (disable) changes the stamp, which ends every session of that user at once.
import { createHmac } from 'node:crypto';
import { constantTimeEqual } from '../credentials/secrets-compare.js';

export interface SessionClaims {
  /** User id. */
  uid: number;
  /** Session stamp (see sessionStamp). */
  st: string;
  /** Issued at and expires at, in seconds since the epoch. */
  iat: number;
  exp: number;
  /** When the session last proved a second factor (seconds since the epoch): a TOTP code or a passkey. */
  mf?: number;
  /** 1: a password sign-in that still has to enrol a second factor (the admins require one): nothing else opens. */
  en?: 1;
}

const PREFIX = 'v1';

function sign(key: Buffer, data: string): Buffer {
  return createHmac('sha256', key).update(data).digest();
}

export function signSession(key: Buffer, claims: SessionClaims): string {
  const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
  const data = `${PREFIX}.${payload}`;
  return `${data}.${sign(key, data).toString('base64url')}`;
}

/** The claims of a well-signed, unexpired token; undefined otherwise. */
export function verifySession(key: Buffer, token: string, nowSeconds: number): SessionClaims | undefined {
  if (token.length > 1024) return undefined;
  const parts = token.split('.');
  if (parts.length !== 3 || parts[0] !== PREFIX) return undefined;
  const expected = sign(key, `${parts[0]}.${parts[1]}`);
  if (!constantTimeEqual(Buffer.from(parts[2], 'base64url'), expected)) return undefined;
  let claims: SessionClaims;
  try {
    claims = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8')) as SessionClaims;
  } catch {
    return undefined;
  }
  const valid =
    Number.isSafeInteger(claims?.uid) &&
    claims.uid > 0 &&
    typeof claims.st === 'string' &&
    Number.isFinite(claims.exp) &&
    Number.isFinite(claims.iat) &&
    (claims.mf === undefined || Number.isFinite(claims.mf)) &&
    (claims.en === undefined || claims.en === 1);
  if (!valid || claims.exp <= nowSeconds) return undefined;
  return claims;
}

/** What ties a session to the user's current password and session epoch. */
export function sessionStamp(key: Buffer, passwordHash: string, epoch: string): string {
  return sign(key, `stamp\n${passwordHash}\n${epoch}`).subarray(0, 16).toString('base64url');
}
