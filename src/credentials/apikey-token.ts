// API key values: "kl_<id>_<secret>", where secret is 32 random bytes (256 bits) in base64url.
// The id lets the gateway find the key in its cache without a host round trip; only the SHA-256
// of the secret is stored (hex, Secret key "keyHash"), compared in constant time. Pure crypto:
// host/apikeys.ts generates keys, auth/auth-service.ts parses and checks them.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { sha256 } from './secrets-compare.js';

const KEY_PATTERN = /^kl_([1-9][0-9]{0,14})_([A-Za-z0-9_-]{43})$/;

export interface ApiKeyParts {
  id: number;
  secret: string;
}

/** A new key's secret and the hash to store; the hash does not depend on the key's id. */
export function generateApiKeySecret(): { secret: string; keyHash: string } {
  const secret = randomBytes(32).toString('base64url');
  return { secret, keyHash: sha256(secret).toString('hex') };
}

/** The value a client sends: the key's id and its secret. */
export function formatApiKey(id: number, secret: string): string {
  return `kl_${id}_${secret}`;
}

export function generateApiKey(id: number): { key: string; keyHash: string } {
  const { secret, keyHash } = generateApiKeySecret();
  return { key: formatApiKey(id, secret), keyHash };
}

export function parseApiKey(value: string): ApiKeyParts | undefined {
  const match = KEY_PATTERN.exec(value);
  return match ? { id: Number(match[1]), secret: match[2] } : undefined;
}

/** The stored hash (hex) as the 32-byte digest it encodes; undefined when it is malformed. */
export function storedKeyDigest(storedHexHash: string): Buffer | undefined {
  return /^[0-9a-f]{64}$/.test(storedHexHash) ? Buffer.from(storedHexHash, 'hex') : undefined;
}

/**
 * One SHA-256 per check: both sides are 32-byte digests, so timingSafeEqual needs no padding.
 * `stored` is the stored hex hash, or its digest from storedKeyDigest (decoded once per Secret).
 */
export function apiKeySecretMatches(secret: string, stored: string | Buffer): boolean {
  const digest = typeof stored === 'string' ? storedKeyDigest(stored) : stored;
  return digest !== undefined && digest.length === 32 && timingSafeEqual(sha256(secret), digest);
}
