// The OAuth (OpenID Connect) provider store: OAuthProvider custom resources named
// objectNameFor('oauthprovider', name) (so the atomic create decides name uniqueness) with the
// client secret in an owned Secret (key clientSecret), which no answer ever carries. The kind's
// rules live here: a provider's name is lower-case and fixed (the `provider` of its users), the
// issuer is an https URL (http only on a loopback host, for development and tests), and the
// client secret is kept when an update does not give a new one.
// Reads come from the watch-backed cache (KindStore); every write returns once this replica's
// cache shows it.
import { isLoopbackHost } from '../config.js';
import { BadRequestError } from '../errors.js';
import type { IdAllocator } from './ids.js';
import { KindStore } from './kind-store.js';
import { objectNameFor } from './names.js';
import { secretValue } from './owned-secrets.js';
import type { OAuthProviderResource, OAuthProviderSpec } from './resources.js';
import type { HostStore } from './store.js';

export const CLIENT_SECRET_KEY = 'clientSecret';
/** Names that are not OAuth providers: the other ways to sign in. */
export const RESERVED_PROVIDER_NAMES = ['password', 'ldap', 'api_key'];

/** A label value too (users carry their provider's name in the label kiteline.io/provider). */
export const PROVIDER_NAME = /^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$/;
const CLAIM_NAME = /^[A-Za-z0-9_:./-]{1,256}$/;

/** What an administrator sets on a provider (Kite's members, plus the claim names). */
export interface OAuthProviderInput {
  name?: string;
  clientId?: string;
  /** Write-only: absent or "" keeps the stored one (Kite's UI sends back "***" it was shown). */
  clientSecret?: string;
  issuer?: string;
  authUrl?: string;
  tokenUrl?: string;
  userInfoUrl?: string;
  scopes?: string;
  usernameClaim?: string;
  groupsClaim?: string;
  /** Comma-separated group names; "" lets anyone sign in. */
  allowedGroups?: string;
  enabled?: boolean;
}

export function providerName(provider: OAuthProviderResource): string {
  return provider.spec?.name || provider.metadata.name;
}

/**
 * A URL kiteline sends a secret to: https (http only on a loopback host), without credentials or a
 * fragment; 400 naming `field` otherwise ("" only when not `required`).
 */
export function checkUrl(field: string, value: string, required: boolean): void {
  if (value === '') {
    if (required) throw new BadRequestError(`${field} is required`);
    return;
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new BadRequestError(`${field} must be a URL`);
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopbackHost(url.hostname)))
    throw new BadRequestError(`${field} must be an https URL (http only on localhost)`);
  if (url.username || url.password || url.hash) throw new BadRequestError(`${field} must not carry credentials or a #`);
}

function checkInput(input: OAuthProviderInput, creating: boolean): void {
  if (creating || input.name !== undefined) {
    const name = input.name ?? '';
    if (!PROVIDER_NAME.test(name))
      throw new BadRequestError(
        "name must be 1 to 63 lower-case letters, digits, '.', '_' and '-', starting and ending with a letter or digit",
      );
    if (RESERVED_PROVIDER_NAMES.includes(name)) throw new BadRequestError(`name "${name}" is reserved`);
  }
  if (creating || input.clientId !== undefined) {
    if (!input.clientId) throw new BadRequestError('clientId is required');
  }
  if (creating || input.issuer !== undefined)
    checkUrl('issuer (OpenID Connect discovery is required)', input.issuer ?? '', true);
  for (const field of ['authUrl', 'tokenUrl', 'userInfoUrl'] as const)
    if (input[field] !== undefined) checkUrl(field, input[field], false);
  if (input.allowedGroups !== undefined && /[\x00-\x1f\x7f]/.test(input.allowedGroups))
    throw new BadRequestError('allowedGroups must be group names separated by commas, on one line');
  for (const field of ['usernameClaim', 'groupsClaim'] as const) {
    const value = input[field];
    if (value !== undefined && value !== '' && !CLAIM_NAME.test(value))
      throw new BadRequestError(`${field} must be a claim name (letters, digits, '_', ':', '.', '/', '-')`);
  }
}

export class OAuthProviderStore extends KindStore<OAuthProviderResource> {
  constructor(host: HostStore, ids: IdAllocator) {
    super(host, ids, {
      plural: 'oauthproviders',
      kind: 'OAuthProvider',
      noun: 'OAuth provider',
      keyOf: providerName,
      cache: (h) => h.oauthProviders,
    });
  }

  byName(name: string): OAuthProviderResource | undefined {
    return this.byKey(name);
  }

  /** The enabled providers, by id: what the login page offers. */
  enabled(): OAuthProviderResource[] {
    return this.list().filter((p) => p.spec.enabled !== false);
  }

  clientSecret(provider: OAuthProviderResource): string | undefined {
    const ref = provider.spec.clientSecretRef?.name;
    return ref ? secretValue(this.host.secrets.get(ref, this.host.namespace), CLIENT_SECRET_KEY) : undefined;
  }

  /** The Secret's resourceVersion: part of what a cached OIDC client configuration depends on. */
  clientSecretVersion(provider: OAuthProviderResource): string {
    const ref = provider.spec.clientSecretRef?.name;
    return (ref && this.host.secrets.get(ref, this.host.namespace)?.metadata?.resourceVersion) || '';
  }

  /** Creates a provider: 400 for bad input, 409 when the name is taken (also under races). */
  async create(input: OAuthProviderInput): Promise<OAuthProviderResource> {
    checkInput(input, true);
    const name = input.name!;
    const objectName = objectNameFor('oauthprovider', name);
    const secretName = `${objectName}-client`;
    const secret = input.clientSecret && input.clientSecret !== '***' ? input.clientSecret : undefined;
    return this.createWithId(
      name,
      () => ({
        metadata: { name: objectName },
        spec: {
          ...specOf(input),
          name,
          enabled: input.enabled ?? true,
          ...(secret ? { clientSecretRef: { name: secretName } } : {}),
        } as OAuthProviderSpec,
      }),
      secret ? { name: secretName, values: { [CLIENT_SECRET_KEY]: secret } } : undefined,
    );
  }

  /**
   * Changes the members given; a new client secret replaces the stored one. Renaming: 400. Moving
   * the issuer or the token endpoint (where the client secret is sent) without giving the secret
   * again: 400, so whoever may edit a provider cannot point it at their own server and receive the
   * stored secret on the next sign-in.
   */
  async update(provider: OAuthProviderResource, input: OAuthProviderInput): Promise<OAuthProviderResource> {
    const name = providerName(provider);
    if (input.name !== undefined && input.name !== name)
      throw new BadRequestError('providers cannot be renamed: their users are bound to the name');
    checkInput({ ...input, name: undefined }, false);
    const secret = input.clientSecret && input.clientSecret !== '***' ? input.clientSecret : undefined;
    const moved = (['issuer', 'tokenUrl'] as const).filter(
      (field) => input[field] !== undefined && input[field] !== (provider.spec[field] ?? ''),
    );
    if (moved.length > 0 && !secret)
      throw new BadRequestError(
        `changing ${moved.join(' and ')} sends the client secret somewhere new: give clientSecret again`,
      );
    if (secret) {
      const secretName = provider.spec.clientSecretRef?.name ?? `${provider.metadata.name}-client`;
      await this.writeSecret(provider, { name: secretName, values: { [CLIENT_SECRET_KEY]: secret } });
      if (!provider.spec.clientSecretRef) input = { ...input, ...{ clientSecretRef: { name: secretName } } };
    }
    const spec = specOf(input);
    if (Object.keys(spec).length === 0) return provider;
    return this.patch(provider, { spec });
  }

  /** Deletes the provider and its client secret. Its users stay (and cannot sign in through it). */
  async delete(provider: OAuthProviderResource): Promise<void> {
    await this.remove(provider, provider.spec.clientSecretRef?.name);
  }
}

/** The spec members an input sets (the secret goes to the Secret, never here). */
function specOf(input: OAuthProviderInput & { clientSecretRef?: { name: string } }): Partial<OAuthProviderSpec> {
  const spec: Partial<OAuthProviderSpec> = {};
  const fields = [
    'clientId',
    'issuer',
    'authUrl',
    'tokenUrl',
    'userInfoUrl',
    'scopes',
    'usernameClaim',
    'groupsClaim',
  ] as const;
  for (const field of fields) if (input[field] !== undefined) spec[field] = input[field];
  // Stored as Kite does (comma-separated), each name trimmed.
  if (input.allowedGroups !== undefined)
    spec.allowedGroups = input.allowedGroups
      .split(',')
      .map((group) => group.trim())
      .filter(Boolean)
      .join(',');
  if (input.enabled !== undefined) spec.enabled = input.enabled;
  if (input.clientSecretRef) spec.clientSecretRef = input.clientSecretRef;
  return spec;
}
