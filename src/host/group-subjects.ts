// Group subjects: the name a role assignment gives an identity provider's group, scoped by the
// provider it comes from, so that two providers (or a provider and the LDAP directory) sending the
// same group name never share its roles:
//   oidc:<OAuthProvider name>/<group>   a group of that OpenID Connect provider (its groups claim)
//   ldap/<group>                        a group of the LDAP directory (its group attribute, cn by default)
// The group is exactly as the provider sends it (case-sensitive, any characters, `/` included:
// only the first `/` ends the provider's name, which cannot contain one).
// A *bare* name (neither prefix: what releases before this one stored) is matched only for the
// users of the one source there is when exactly one is configured, and rewritten to that source's
// form at start-up (docs/auth.md, "Groups are scoped by their provider").
import { BadRequestError } from '../errors.js';
import { PROVIDER_NAME, RESERVED_PROVIDER_NAMES } from './oauth-providers.js';

/** The provider label of the directory's users (auth/ldap.ts signs them in with this provider). */
export const LDAP_SOURCE = 'ldap';
const OIDC_PREFIX = 'oidc:';
const LDAP_PREFIX = `${LDAP_SOURCE}/`;
const MAX_GROUP_SUBJECT = 1024;

/** The subject of `group` as `source` (the user's provider: "ldap" or an OAuthProvider's name) sends it. */
export function groupSubject(source: string, group: string): string {
  return source === LDAP_SOURCE ? `${LDAP_PREFIX}${group}` : `${OIDC_PREFIX}${source}/${group}`;
}

/** A subject written before groups were scoped (no source prefix). */
export function isBareGroupSubject(subject: string): boolean {
  return !subject.startsWith(OIDC_PREFIX) && !subject.startsWith(LDAP_PREFIX) && !subject.startsWith('ldap:');
}

/**
 * The subjects a user of `source` holds with these groups: each group scoped by the source, and,
 * when `source` is the only source configured (`soleSource`), each bare name too.
 */
export function groupSubjectsOf(source: string, groups: readonly string[], soleSource: string | undefined): string[] {
  const scoped = groups.map((g) => groupSubject(source, g));
  return source === soleSource ? [...scoped, ...groups] : scoped;
}

/** Why a scoped subject is malformed, or undefined when it is well formed (bare names are not checked here). */
function malformed(subject: string): string | undefined {
  if (subject.startsWith('ldap:')) return `LDAP groups are written ldap/<group>, not ${subject.slice(0, 64)}`;
  if (subject.startsWith(LDAP_PREFIX))
    return subject.length > LDAP_PREFIX.length ? undefined : 'ldap/ needs the group after it';
  if (!subject.startsWith(OIDC_PREFIX)) return undefined;
  const rest = subject.slice(OIDC_PREFIX.length);
  const slash = rest.indexOf('/');
  const provider = slash < 0 ? rest : rest.slice(0, slash);
  if (slash < 0 || slash === rest.length - 1) return 'an OpenID Connect group is written oidc:<provider>/<group>';
  if (!PROVIDER_NAME.test(provider) || RESERVED_PROVIDER_NAMES.includes(provider))
    return `"${provider.slice(0, 64)}" cannot be an OAuth provider's name (lower-case letters, digits, '.', '_', '-')`;
  return undefined;
}

/**
 * The subject a role assignment stores for what an administrator sent: a scoped subject as it is
 * (400 when malformed); a bare name scoped by the only source configured (`sources`: "ldap" and
 * the OAuthProviders' names), else 400 naming the forms to choose from.
 */
export function resolveGroupSubject(subject: string, sources: readonly string[]): string {
  if (subject.length > MAX_GROUP_SUBJECT) throw new BadRequestError('a group subject has at most 1024 characters');
  const problem = malformed(subject);
  if (problem) throw new BadRequestError(problem);
  if (!isBareGroupSubject(subject)) return subject;
  if (sources.length === 1) return groupSubject(sources[0], subject);
  const forms = sources.map((s) => groupSubject(s, subject)).join(', ');
  throw new BadRequestError(
    sources.length === 0
      ? `no identity provider is configured: name the group as oidc:<provider>/${subject} or ldap/${subject}`
      : `several identity providers could send the group "${subject}": name one of ${forms}`,
  );
}
