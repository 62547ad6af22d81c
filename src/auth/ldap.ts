// Sign-in against an LDAP directory (ldapts): bind as the service account, find the user by the
// configured filter, bind as the user with the password given (the directory checks it), bind as
// the service account again and read the user's groups. ldaps:// or StartTLS with the configured
// CA; certificates are always verified. The directory is asked on every sign-in, so a user removed
// from it (or from a group) is refused (or loses the group's roles) at their next sign-in. Which
// directory, if any, is read at each sign-in too (host/ldap-setting.ts: an LDAPSetting, else the
// environment's), so a change made in Kite's UI or with kubectl holds from the next sign-in on.
import { Client, InvalidCredentialsError, type Entry } from 'ldapts';
import type { LdapConfig } from '../config.js';
import { ServiceUnavailableError } from '../errors.js';
import { LDAP_SOURCE } from '../host/group-subjects.js';
import type { ExternalIdentity } from '../host/users.js';

/** The provider of the directory's users (their label, and `ldap/` in group subjects). */
export const LDAP_PROVIDER = LDAP_SOURCE;

const USERNAME = /^[A-Za-z0-9._@-]{1,63}$/;
const ENTRY_UUID = 'entryUUID';

/** RFC 4515 escaping of a value put into a search filter. */
export function escapeFilterValue(value: string): string {
  return value.replace(/[\\*()\0]/g, (c) => `\\${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

function first(entry: Entry, attribute: string): string | undefined {
  const value = entry[attribute] ?? entry[Object.keys(entry).find((k) => k.toLowerCase() === attribute.toLowerCase())!];
  const one = Array.isArray(value) ? value[0] : value;
  if (one === undefined) return undefined;
  return Buffer.isBuffer(one) ? one.toString('utf8') : String(one);
}

export class LdapAuthenticator {
  constructor(
    /** The directory in force now; undefined: none (LDAP sign-in is off). */
    private readonly directory: () => LdapConfig | undefined,
    /** The service account's password: key `password` of the Secret named, read when needed. */
    private readonly bindPassword: (secretName: string) => string | undefined,
  ) {}

  /** A directory is in force now. */
  get configured(): boolean {
    return this.directory() !== undefined;
  }

  private client(config: LdapConfig): Client {
    const tlsOptions = { ...(config.ca ? { ca: [config.ca] } : {}), minVersion: 'TLSv1.2' as const };
    return new Client({
      url: config.url,
      timeout: config.timeoutMs,
      connectTimeout: config.timeoutMs,
      ...(config.url.startsWith('ldaps:') ? { tlsOptions } : {}),
      strictDN: true,
    });
  }

  /**
   * The identity of the user when the directory accepts the password; undefined for an unknown
   * user, a wrong password, or a name that cannot be a username. A directory that cannot be
   * reached (or a service account it refuses) is a 503, not a failed login.
   */
  async authenticate(username: string, password: string): Promise<ExternalIdentity | undefined> {
    // An empty password would be an "unauthenticated bind", which many directories accept.
    if (password === '') return undefined;
    return this.lookup(username, password);
  }

  /**
   * The directory's entry for the username now (DN, name, groups) without the user's password:
   * the periodic re-check of directory users. undefined: no such user (any more).
   */
  async entry(username: string): Promise<ExternalIdentity | undefined> {
    return this.lookup(username, undefined);
  }

  private async lookup(username: string, password: string | undefined): Promise<ExternalIdentity | undefined> {
    // The directory of this sign-in, read once: one turned off meanwhile is not "no such user".
    const config = this.directory();
    if (!config) throw new ServiceUnavailableError('LDAP sign-in is not configured');
    if (!USERNAME.test(username)) return undefined;
    const client = this.client(config);
    const serviceBind = async () => {
      const secret = this.bindPassword(config.bindPasswordSecret);
      if (!secret) throw new ServiceUnavailableError('the LDAP service account password is not configured');
      try {
        await client.bind(config.bindDn, secret);
      } catch (err) {
        throw directoryError('the LDAP directory refused the service account', err);
      }
    };
    try {
      try {
        if (config.startTls)
          await client.startTLS({ ...(config.ca ? { ca: [config.ca] } : {}), minVersion: 'TLSv1.2' });
      } catch (err) {
        throw directoryError('LDAP StartTLS failed', err);
      }
      await serviceBind();
      // Function replacers: a `$&` or `$'` in a value must not splice parts of the template in.
      const filter = config.userFilter.replaceAll('{username}', () => escapeFilterValue(username));
      const { searchEntries: users } = await client.search(config.userBase, {
        scope: 'sub',
        filter,
        sizeLimit: 2,
        // entryUUID (RFC 4530; OpenLDAP, 389 Directory Server): an operational attribute, sent only when asked for.
        attributes: ['dn', config.usernameAttribute, config.nameAttribute, 'mail', ENTRY_UUID],
      });
      // None, or an ambiguous filter: nobody signs in.
      if (users.length !== 1) return undefined;
      const user = users[0];
      if (password !== undefined) {
        try {
          await client.bind(user.dn, password);
        } catch (err) {
          if (err instanceof InvalidCredentialsError) return undefined;
          throw err;
        }
      }
      const directoryName = first(user, config.usernameAttribute);
      const name = first(user, config.nameAttribute);
      const groups: string[] = [];
      if (config.groupBase) {
        if (password !== undefined) await serviceBind();
        const groupFilter = config.groupFilter
          .replaceAll('{dn}', () => escapeFilterValue(user.dn))
          .replaceAll('{username}', () => escapeFilterValue(directoryName ?? username));
        const { searchEntries } = await client.search(config.groupBase, {
          scope: 'sub',
          filter: groupFilter,
          sizeLimit: 1000,
          attributes: [config.groupAttribute],
        });
        for (const entry of searchEntries) {
          const group = first(entry, config.groupAttribute);
          if (group) groups.push(group);
        }
      }
      // The entry's entryUUID is who the user is: a DN is re-used when an entry is deleted and another
      // made under the same name (a new person), and changes when an entry is renamed or moved. A
      // directory without entryUUID falls back to the DN. A user recorded by its DN (before) is
      // bound by it once and then gets the entryUUID (formerSubjects).
      const uuid = first(user, ENTRY_UUID);
      return {
        provider: LDAP_PROVIDER,
        subject: uuid ?? user.dn,
        ...(uuid ? { formerSubjects: [user.dn] } : {}),
        username: directoryName && USERNAME.test(directoryName) ? directoryName : username,
        ...(name ? { name } : {}),
        groups,
      };
    } catch (err) {
      if (err instanceof ServiceUnavailableError) throw err;
      throw directoryError('the LDAP directory failed', err);
    } finally {
      await client.unbind().catch(() => undefined);
    }
  }
}

/**
 * A 503 for a directory failure: the directory's own words (which can tell, say, that the service
 * account's password is wrong) go to the gateway log as the error's cause, not to the caller.
 */
function directoryError(what: string, cause: unknown): ServiceUnavailableError {
  return Object.assign(new ServiceUnavailableError(`${what} (the gateway log has the details)`), { cause });
}
