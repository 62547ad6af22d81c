// The periodic re-check of directory users (LDAP): every interval, on the leader replica only,
// each user of the directory is looked up with the service account. One the directory no longer
// has (or has under another DN) is revoked: every session ends and their API keys stop. One it
// still has gets the directory's groups now, so a group change reaches their roles without a new
// sign-in. A directory that cannot be reached changes nothing (the round is tried again later), nor
// does having none (LDAP turned off: its users' sessions are suspended instead, auth-service.ts).
import { identityHasSubject, userProvider, userSubject, type UserStore } from '../host/users.js';
import type { Logger } from '../log.js';
import { LDAP_PROVIDER, type LdapAuthenticator } from './ldap.js';

export class LdapRecheck {
  private timer: NodeJS.Timeout | undefined;
  private running = false;

  constructor(
    private readonly ldap: LdapAuthenticator,
    private readonly users: UserStore,
    private readonly intervalMs: number,
    private readonly isLeader: () => boolean,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.runOnce(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One round (skipped when one is still running, this replica is not the leader, or no directory is in force). */
  async runOnce(): Promise<void> {
    if (this.running || !this.isLeader() || !this.ldap.configured) return;
    this.running = true;
    const message = (err: unknown) => (err instanceof Error ? err.message : String(err));
    try {
      for (const user of this.users.list()) {
        if (userProvider(user) !== LDAP_PROVIDER) continue;
        let entry;
        try {
          entry = await this.ldap.entry(user.spec.username);
        } catch (err) {
          // The directory itself failed: the same for everyone after this one; the next round retries.
          this.log.warn({ err: message(err) }, 'LDAP re-check failed; will retry');
          return;
        }
        try {
          if (!entry || !identityHasSubject(entry, userSubject(user))) {
            await this.users.revokeExternal(user);
            this.log.info({ user: user.spec.username }, 'directory user gone: sessions ended, API keys stopped');
          } else {
            await this.users.confirmExternal(user, entry.groups, this.intervalMs * 10);
          }
        } catch (err) {
          // One user's write failed: the others are still checked.
          this.log.warn({ user: user.spec.username, err: message(err) }, 'LDAP re-check of a user failed; will retry');
        }
      }
    } finally {
      this.running = false;
    }
  }
}
