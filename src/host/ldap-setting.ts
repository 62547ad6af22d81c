// The LDAP setting store: the directory users sign in against, as Kite's UI configures it (Settings
// → Authentication) or `kubectl apply` does, the one LDAPSetting named `ldap` (setting-store.ts),
// with the service account's password in the owned Secret `kiteline-ldap-setting` (key password):
// write-only, no answer carries it, only whether one is stored.
//
// How it combines with the environment (docs/auth.md, "LDAP"): while an LDAPSetting exists it
// decides, enabled or not, and KITELINE_LDAP_* is not used; without one, the environment's
// directory (if any) is in force and is what GET shows. A change that leaves what is in force as it
// is writes nothing (saving the UI's page unchanged does not freeze the environment into an object).
//
// The rules are those of the environment's directory (config.ts, ldapAddressProblem: TLS, loopback)
// plus Kite's (required members when enabled, one placeholder per filter), and a stored password is
// never sent anywhere new (another server or CA) without being given again. Filters take kiteline's
// placeholders ({username}; {dn} and {username} for groups) or Kite's single %s (the username; the
// user's DN for groups, %% a literal %). A setting applied with kubectl that breaks a rule is not
// used (no LDAP sign-in) and says why in GET and in the log.
import { X509Certificate } from 'node:crypto';
import { FilterParser } from 'ldapts';
import { ldapAddressProblem, type LdapConfig, type LdapTiming } from '../config.js';
import { BadRequestError } from '../errors.js';
import type { Logger } from '../log.js';
import type { LdapSettingResource, LdapSettingSpec } from './resources.js';
import { SettingStore } from './setting-store.js';
import type { HostStore } from './store.js';

export const LDAP_SETTING_NAME = 'ldap';
export const LDAP_SETTING_SECRET = 'kiteline-ldap-setting';
/** The key of the service account's password, in this store's Secret and in the environment's. */
const PASSWORD_KEY = 'password';

const DEFAULTS = {
  userFilter: '(uid={username})',
  usernameAttribute: 'uid',
  displayNameAttribute: 'cn',
  groupFilter: '(member={dn})',
  groupNameAttribute: 'cn',
};
/** An attribute name (RFC 4512 descr) or OID. */
const ATTRIBUTE = /^(?:[A-Za-z][A-Za-z0-9-]{0,127}|\d+(?:\.\d+)+)$/;
/** A DN or filter holds no control characters (a line break would end an LDIF line, say). */
const CONTROL = /[\x00-\x1f\x7f]/;
/** Kite's filters: `%s` once, any other `%` doubled. */
const KITE_PLACEHOLDER = /%([s%])/g;

export type LdapSettingSource = 'setting' | 'environment' | 'none';

/** What Kite's UI reads (defaults filled in), never the password; `problem`: why it is not in use. */
export interface LdapSettings {
  enabled: boolean;
  serverUrl: string;
  useStartTLS: boolean;
  caCert: string;
  bindDn: string;
  bindPasswordConfigured: boolean;
  userBaseDn: string;
  userFilter: string;
  usernameAttribute: string;
  displayNameAttribute: string;
  groupBaseDn: string;
  groupFilter: string;
  groupNameAttribute: string;
  source: LdapSettingSource;
  problem: string;
}

/** A change: the members given (strings trimmed); `bindPassword` absent or "" keeps the stored one. */
export type LdapSettingInput = Omit<LdapSettingSpec, 'bindPasswordSecretRef'> & { bindPassword?: string };

type Members = Omit<LdapSettings, 'bindPasswordConfigured' | 'source' | 'problem'>;
const STRINGS = [
  'serverUrl',
  'caCert',
  'bindDn',
  'userBaseDn',
  'userFilter',
  'usernameAttribute',
  'displayNameAttribute',
  'groupBaseDn',
  'groupFilter',
  'groupNameAttribute',
] as const;

/** The members a spec says, trimmed, defaults filled in. */
function membersOf(spec: LdapSettingSpec): Members {
  const text = (value: string | undefined) => value?.trim() ?? '';
  return {
    enabled: spec.enabled ?? false,
    serverUrl: text(spec.serverUrl),
    useStartTLS: spec.useStartTLS ?? false,
    caCert: text(spec.caCert),
    bindDn: text(spec.bindDn),
    userBaseDn: text(spec.userBaseDn),
    userFilter: text(spec.userFilter) || DEFAULTS.userFilter,
    usernameAttribute: text(spec.usernameAttribute) || DEFAULTS.usernameAttribute,
    displayNameAttribute: text(spec.displayNameAttribute) || DEFAULTS.displayNameAttribute,
    groupBaseDn: text(spec.groupBaseDn),
    groupFilter: text(spec.groupFilter) || DEFAULTS.groupFilter,
    groupNameAttribute: text(spec.groupNameAttribute) || DEFAULTS.groupNameAttribute,
  };
}

/** The environment's directory as a spec (what GET shows while no LDAPSetting exists). */
function specOfEnvironment(env: LdapConfig): LdapSettingSpec {
  return {
    enabled: true,
    serverUrl: env.url,
    useStartTLS: env.startTls,
    caCert: env.ca ?? '',
    bindDn: env.bindDn,
    bindPasswordSecretRef: { name: env.bindPasswordSecret },
    userBaseDn: env.userBase,
    userFilter: env.userFilter,
    usernameAttribute: env.usernameAttribute,
    displayNameAttribute: env.nameAttribute,
    groupBaseDn: env.groupBase,
    groupFilter: env.groupFilter,
    groupNameAttribute: env.groupAttribute,
  };
}

/** A filter in kiteline's placeholders: Kite's `%s` becomes `placeholder` (and `%%` a `%`). */
function withPlaceholders(filter: string, placeholder: string): string {
  return filter.includes('%s')
    ? filter.replace(KITE_PLACEHOLDER, (_, c: string) => (c === 's' ? placeholder : '%'))
    : filter;
}

/** What is wrong with a filter (its placeholders, its syntax), or undefined. */
function filterProblem(field: string, filter: string, placeholders: string[]): string | undefined {
  if (filter.includes('%s')) {
    if (filter.replace(/%%/g, '').match(/%/g)?.length !== 1 || /%[^s%]|%$/.test(filter.replace(/%%/g, '')))
      return `${field} must contain %s exactly once (another % is written %%)`;
  } else if (!placeholders.some((p) => filter.includes(p))) {
    return `${field} must contain ${placeholders.join(' or ')} (or Kite's %s)`;
  }
  if (CONTROL.test(filter) || !filter.startsWith('(') || !filter.endsWith(')'))
    return `${field} must be one parenthesized LDAP filter`;
  try {
    FilterParser.parseString(withPlaceholders(filter, 'x').replace(/\{(?:username|dn)\}/g, 'x'));
  } catch (err) {
    return `${field} is not an LDAP filter: ${(err as Error).message.split('. Full string')[0]}`;
  }
  return undefined;
}

/** What keeps the members from being used (the environment's rules and Kite's), or undefined. */
function membersProblem(m: Members, passwordStored: boolean): string | undefined {
  if (m.serverUrl !== '') {
    const problem = ldapAddressProblem(m.serverUrl, m.useStartTLS, { url: 'serverUrl', startTls: 'useStartTLS' });
    if (problem) return problem;
  }
  if (m.caCert !== '') {
    try {
      new X509Certificate(m.caCert);
    } catch {
      return 'caCert must be a PEM certificate';
    }
  }
  for (const field of ['bindDn', 'userBaseDn', 'groupBaseDn'] as const)
    if (CONTROL.test(m[field]) || m[field].length > 1024) return `${field} must be a DN (one line, at most 1024)`;
  for (const field of ['usernameAttribute', 'displayNameAttribute', 'groupNameAttribute'] as const)
    if (!ATTRIBUTE.test(m[field])) return `${field} must be an attribute name or OID`;
  const filters = [
    filterProblem('userFilter', m.userFilter, ['{username}']),
    filterProblem('groupFilter', m.groupFilter, ['{dn}', '{username}']),
  ];
  if (filters.some(Boolean)) return filters.find(Boolean);
  if (!m.enabled) return undefined;
  for (const field of ['serverUrl', 'bindDn', 'userBaseDn'] as const)
    if (m[field] === '') return `${field} is required when enabled is true`;
  if (!passwordStored) return 'bindPassword is required when enabled is true';
  return undefined;
}

function sameMembers(a: Members, b: Members): boolean {
  return (Object.keys(a) as (keyof Members)[]).every((key) => a[key] === b[key]);
}

export class LdapSettingStore extends SettingStore<LdapSettingSpec, LdapSettingResource> {
  /** The directory of the last object seen, by its resourceVersion ("" for the environment's). */
  private cached: { version: string; directory: LdapConfig | undefined } | undefined;

  constructor(
    host: HostStore,
    /** The environment's directory (KITELINE_LDAP_*), in force while no LDAPSetting exists. */
    private readonly environment: LdapConfig | undefined,
    private readonly timing: LdapTiming,
    /** Why a directory in force may not be turned off now (nobody could sign in), or undefined. */
    private readonly mayTurnOff: () => string | undefined,
    private readonly log: Logger,
  ) {
    super(host, {
      plural: 'ldapsettings',
      kind: 'LDAPSetting',
      name: LDAP_SETTING_NAME,
      noun: 'LDAP setting',
      cache: (h) => h.ldapSettings,
    });
  }

  /** The spec in force and where it comes from. */
  private inForce(): { spec: LdapSettingSpec; source: LdapSettingSource } {
    const object = this.object();
    if (object) return { spec: object.spec ?? {}, source: 'setting' };
    if (this.environment) return { spec: specOfEnvironment(this.environment), source: 'environment' };
    return { spec: {}, source: 'none' };
  }

  private passwordOf(spec: LdapSettingSpec): string | undefined {
    return this.secretValue(spec.bindPasswordSecretRef?.name, PASSWORD_KEY) || undefined;
  }

  settings(): LdapSettings {
    const { spec, source } = this.inForce();
    const members = membersOf(spec);
    const bindPasswordConfigured = this.passwordOf(spec) !== undefined;
    // The password's presence is not a reason here: without it, a sign-in says so (503).
    const problem = source === 'setting' ? (membersProblem(members, true) ?? '') : '';
    return { ...members, bindPasswordConfigured, source, problem };
  }

  /**
   * The directory users sign in against now: the LDAPSetting's when there is one (none while it is
   * disabled or breaks a rule), else the environment's. Read on every sign-in and every request of
   * a directory user, so it is worked out once per version of the object.
   */
  directory(): LdapConfig | undefined {
    const object = this.object();
    const version = object?.metadata.resourceVersion ?? '';
    if (this.cached?.version === version) return this.cached.directory;
    let directory: LdapConfig | undefined = object ? undefined : this.environment;
    if (object) {
      const members = membersOf(object.spec ?? {});
      const problem = membersProblem(members, true);
      if (problem) this.log.warn({ problem }, 'the LDAPSetting is not used: LDAP sign-in is off until it is fixed');
      else if (members.enabled) directory = this.directoryOf(members, object.spec?.bindPasswordSecretRef?.name ?? '');
    }
    this.cached = { version, directory };
    return directory;
  }

  private directoryOf(m: Members, bindPasswordSecret: string): LdapConfig {
    return {
      url: m.serverUrl,
      startTls: m.useStartTLS,
      ca: m.caCert || undefined,
      bindDn: m.bindDn,
      bindPasswordSecret,
      userBase: m.userBaseDn,
      userFilter: withPlaceholders(m.userFilter, '{username}'),
      usernameAttribute: m.usernameAttribute,
      nameAttribute: m.displayNameAttribute,
      groupBase: m.groupBaseDn,
      groupFilter: withPlaceholders(m.groupFilter, '{dn}'),
      groupAttribute: m.groupNameAttribute,
      ...this.timing,
    };
  }

  /**
   * Changes the members given, on what is in force (the environment's directory while no
   * LDAPSetting exists); a new bindPassword replaces the stored one. 400 when a rule is broken, and
   * then nothing is written.
   */
  async update(input: LdapSettingInput): Promise<LdapSettings> {
    await this.write((live) => {
      const base = live ? (live.spec ?? {}) : this.inForce().spec;
      const current = membersOf(base);
      const next: Members = { ...current };
      if (input.enabled !== undefined) next.enabled = input.enabled;
      if (input.useStartTLS !== undefined) next.useStartTLS = input.useStartTLS;
      for (const field of STRINGS) if (input[field] !== undefined) next[field] = input[field].trim();
      const normalized = membersOf(next);
      const newPassword = input.bindPassword || undefined;
      const stored = this.passwordOf(base);
      const moved = (['serverUrl', 'caCert'] as const).filter((field) => normalized[field] !== current[field]);
      if (stored && !newPassword && moved.length > 0)
        throw new BadRequestError(
          `changing ${moved.join(' and ')} sends the bind password somewhere new: give bindPassword again`,
        );
      const problem = membersProblem(normalized, newPassword !== undefined || stored !== undefined);
      if (problem) throw new BadRequestError(problem);
      if (current.enabled && !normalized.enabled) {
        const refusal = this.mayTurnOff();
        if (refusal) throw new BadRequestError(refusal);
      }
      if (!live && !newPassword && sameMembers(normalized, current)) return undefined;
      // A new password goes to kiteline's own Secret, never into the environment's or one a
      // reference applied with kubectl names.
      const ref = newPassword ? { name: LDAP_SETTING_SECRET } : base.bindPasswordSecretRef;
      return {
        spec: { ...normalized, ...(ref ? { bindPasswordSecretRef: ref } : {}) },
        ...(newPassword ? { secret: { name: LDAP_SETTING_SECRET, values: { [PASSWORD_KEY]: newPassword } } } : {}),
      };
    });
    return this.settings();
  }
}
