// Makes password Secrets hold hashes only: a User's Secret applied with a plain `password` key
// (the kubectl way) gets it replaced by `passwordHash` (scrypt), and kubectl's last-applied
// annotation, which would keep the plain text, is removed. Runs on every replica on cache events;
// the write is a resourceVersion-guarded replace, so racing replicas cannot clobber each other.
// A Secret a GitOps engine applies (gitops.ts) is left as it is: the engine would put the plain
// key back on its next sync, and the two would rewrite it forever. Its plain password still signs
// in (compared in constant time); docs/gitops.md says to keep it SOPS-encrypted in Git.
import type * as k8s from '@kubernetes/client-node';
import { hashPassword } from '../credentials/passwords.js';
import { ConflictError } from '../errors.js';
import type { Logger } from '../log.js';
import { managedByOf } from './gitops.js';
import { describeApiError, isNotFound } from './host-errors.js';
import { LAST_APPLIED_ANNOTATION, secretValue } from './owned-secrets.js';
import { SerialTask } from './serial-task.js';
import type { HostStore } from './store.js';
import { PASSWORD_HASH_KEY, PLAIN_PASSWORD_KEY } from './users.js';

export class PlainPasswordHasher {
  private readonly task: SerialTask;

  constructor(
    private readonly host: HostStore,
    private readonly log: Logger,
  ) {
    this.task = new SerialTask(
      () => this.hashAll(),
      (err) =>
        this.log.warn({ err: describeApiError(err) }, 'hashing plain passwords failed; will retry on the next change'),
    );
  }

  start(): void {
    for (const cache of [this.host.users, this.host.secrets] as const) {
      cache.on('add', () => this.task.request());
      cache.on('update', () => this.task.request());
    }
    this.task.request();
  }

  stop(): void {
    this.task.stop();
  }

  private async hashAll(): Promise<void> {
    for (const user of this.host.users.list()) {
      const ref = user.spec?.passwordSecretRef?.name;
      const secret = ref ? this.host.secrets.get(ref, this.host.namespace) : undefined;
      const plain = secretValue(secret, PLAIN_PASSWORD_KEY);
      if (!secret || plain === undefined || managedByOf(secret)) continue;
      await this.hashOne(secret, plain);
    }
  }

  private async hashOne(secret: k8s.V1Secret, plain: string): Promise<void> {
    const data = { ...secret.data };
    delete data[PLAIN_PASSWORD_KEY];
    data[PASSWORD_HASH_KEY] = Buffer.from(await hashPassword(plain)).toString('base64');
    const annotations = { ...secret.metadata?.annotations };
    delete annotations[LAST_APPLIED_ANNOTATION];
    try {
      await this.host.core.replaceNamespacedSecret({
        name: secret.metadata!.name!,
        namespace: this.host.namespace,
        body: { ...secret, metadata: { ...secret.metadata, annotations }, data },
      });
      this.log.info({ secret: secret.metadata!.name }, 'replaced a plain password by its hash');
    } catch (err) {
      if (err instanceof ConflictError || isNotFound(err)) return; // changed meanwhile: the next event retries
      throw err;
    }
  }
}
