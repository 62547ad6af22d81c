// Helm chart repositories (docs/helm.md): ChartRepository custom resources in the install namespace
// (crds/chartrepositories.kiteline.io.yaml), named objectNameFor('chartrepository', name) so an
// atomic create decides uniqueness, each with its credentials (keys `username` and `password`) in a
// Secret it owns. Two kinds, by the URL's scheme: a classic repository (`https://…`, its
// index.yaml) and an OCI registry path (`oci://host/path`, whose charts the spec lists, since a
// registry has no catalog of charts). Admins write them through the API or kubectl, like every kind;
// reads are rare (the chart pages, an install), so they go to the API server, as templates do.
import type { KubernetesObject, V1ObjectMeta } from '@kubernetes/client-node';
import { ConflictError, NotFoundError } from '../errors.js';
import { CustomResources } from './crud.js';
import { isAlreadyExists, isNotFound } from './host-errors.js';
import { objectNameFor } from './names.js';
import { deleteOwnedSecret, secretValue, writeOwnedSecret } from './owned-secrets.js';
import { MANAGED_BY, MANAGED_BY_LABEL } from './resources.js';
import type { HostStore } from './store.js';

export interface ChartRepositorySpec {
  name: string;
  /** `https://…` or `http://…` (a classic repository: `<url>/index.yaml`), or `oci://host[:port]/path`. */
  url: string;
  description?: string;
  /** OCI only: the charts under the path (a registry cannot list them). */
  charts?: string[];
  /** OCI only: the registry speaks plain http (a test or in-cluster registry). */
  plainHttp?: boolean;
  /** A Secret in the install namespace with `username` and `password`. */
  credentialsSecretRef?: { name: string };
}

export interface ChartRepositoryResource extends KubernetesObject {
  metadata: V1ObjectMeta & { name: string };
  spec: ChartRepositorySpec;
}

export interface RepositoryCredentials {
  username: string;
  password: string;
}

/** The one Secret a repository's credentials may be in: `<object name>-credentials`, owned by it. */
export function credentialsSecretName(repository: { metadata: { name: string } }): string {
  return `${repository.metadata.name}-credentials`;
}

export function isOciRepository(repository: ChartRepositorySpec): boolean {
  return repository.url.startsWith('oci://');
}

export class ChartRepositoryStore {
  private readonly crs: CustomResources<ChartRepositoryResource>;

  constructor(private readonly host: HostStore) {
    this.crs = new CustomResources(host.customObjects, host.namespace, 'chartrepositories', 'ChartRepository');
  }

  /** Every repository with a name and URL, by name. */
  async list(): Promise<ChartRepositoryResource[]> {
    return (await this.crs.list())
      .filter((r) => typeof r.spec?.name === 'string' && typeof r.spec.url === 'string')
      .sort((a, b) => a.spec.name.localeCompare(b.spec.name));
  }

  /** The repository of this name; 404 when there is none. */
  async byName(name: string): Promise<ChartRepositoryResource> {
    const found = (await this.list()).find((r) => r.spec.name === name);
    if (!found) throw new NotFoundError(`chart repository not found: ${name}`);
    return found;
  }

  /** Its username and password, when it has a credentials Secret holding both. */
  credentials(repository: ChartRepositoryResource): RepositoryCredentials | undefined {
    // Only the repository's own Secret: a reference to another Secret of the install namespace (a
    // user's password, a kubeconfig) is never read or sent anywhere.
    const ref = repository.spec.credentialsSecretRef?.name;
    if (!ref || ref !== credentialsSecretName(repository)) return undefined;
    const secret = this.host.secrets.get(ref, this.host.namespace);
    const username = secretValue(secret, 'username');
    const password = secretValue(secret, 'password');
    return username && password !== undefined ? { username, password } : undefined;
  }

  /** Creates a repository (and its credentials Secret); 409 when the name is taken. */
  async create(spec: ChartRepositorySpec, credentials?: RepositoryCredentials): Promise<ChartRepositoryResource> {
    const name = objectNameFor('chartrepository', spec.name);
    let created: ChartRepositoryResource;
    try {
      created = await this.crs.create({
        metadata: { name, labels: { [MANAGED_BY_LABEL]: MANAGED_BY } },
        spec: {
          ...spec,
          ...(credentials ? { credentialsSecretRef: { name: credentialsSecretName({ metadata: { name } }) } } : {}),
        },
      });
    } catch (err) {
      if (isAlreadyExists(err))
        throw new ConflictError(`chart repository already exists: ${spec.name}`, 'AlreadyExists');
      throw err;
    }
    if (credentials) await this.writeCredentials(created, credentials);
    return created;
  }

  /**
   * Changes the URL, description, charts or plain-http flag (the name stays); `credentials`: new
   * ones, or null to remove them, or undefined to keep them.
   */
  async update(
    repository: ChartRepositoryResource,
    changes: Partial<Omit<ChartRepositorySpec, 'name' | 'credentialsSecretRef'>>,
    credentials?: RepositoryCredentials | null,
  ): Promise<ChartRepositoryResource> {
    const secretName = credentialsSecretName(repository);
    const spec: ChartRepositorySpec = { ...repository.spec, ...changes };
    if (credentials === null) delete spec.credentialsSecretRef;
    else if (credentials) spec.credentialsSecretRef = { name: secretName };
    let updated: ChartRepositoryResource;
    try {
      updated = await this.crs.replace({ ...repository, spec });
    } catch (err) {
      if (isNotFound(err)) throw new NotFoundError(`chart repository not found: ${repository.spec.name}`);
      throw err;
    }
    if (credentials) await this.writeCredentials(updated, credentials);
    if (credentials === null)
      await deleteOwnedSecret(
        this.host.core,
        this.host.namespace,
        this.host.secrets.get(secretName, this.host.namespace),
      );
    return updated;
  }

  /** Deletes the repository; its credentials Secret goes with it (owner reference). */
  async delete(repository: ChartRepositoryResource): Promise<void> {
    try {
      await this.crs.delete(repository.metadata.name, repository.metadata.uid);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  private async writeCredentials(owner: ChartRepositoryResource, credentials: RepositoryCredentials): Promise<void> {
    const name = owner.spec.credentialsSecretRef!.name;
    await writeOwnedSecret(this.host, owner, { name, values: { ...credentials } });
  }
}
