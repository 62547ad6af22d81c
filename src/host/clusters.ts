// The cluster store: everything below the routes for registered clusters. It owns the Cluster
// custom resource and its kubeconfig Secret, the cluster's shapes (ClusterInput in, Cluster as
// read, ClusterView out), its id (created with one; objects applied with kubectl get theirs from
// IdBackfill, as every kind does) and the kind's rules, each one atomic operation:
//
// - a name is used by one cluster: create is atomic on the object name derived from it (names.ts);
//   a rename checks the names in the cache (two renames racing onto one name are reported by the
//   reconciler as a NameConflict in the status; the lower id serves the name);
// - exactly one default cluster: the first cluster is the default; setting the default stamps
//   kiteline.io/default-since and settleDefaults() clears every other default (preferDefault
//   decides, the same order the ClusterRegistry serves by); the default cannot be unset nor
//   deleted (a delete preconditioned on the resourceVersion that was checked); the leader calls
//   settleDefaults() after every change, which also marks a default when none is left;
// - the bootstrap import: closed once any cluster exists; its plan (one cluster per usable
//   context, the current context the default) is validated whole, then the import lock (a
//   ConfigMap whose atomic creation picks one winner) is taken and the clusters are created.
//
// - clusters from sources (Argo CD cluster Secrets, Cluster API kubeconfig Secrets, ClusterProfiles;
//   clusters/sources.ts watches them): materialised as Cluster objects labelled kiteline.io/source
//   with a deterministic object name (so every replica and restart finds the same object and id),
//   written only by applySource/removeSource; the admin API's update and delete refuse them (409
//   naming the source), a REST or kubectl cluster of the same name keeps the name (registry.ts).
//
// Every write returns once this replica's cache holds it (read-your-writes, KindStore), and a write
// that (re)connects a cluster returns once this replica probed it (ClusterConnections, given by
// ClusterManager). Host failures arrive translated (host-errors.ts); conflicts are retried by
// retry.ts.
import { KubeconfigError, sanitizeAllContexts, sanitizeKubeconfig } from '../credentials/kubeconfig.js';
import { REFUSED_WHY, refusedAddress } from '../credentials/refused-addresses.js';
import type { SourceCluster, SourceKind } from '../credentials/source-kubeconfig.js';
import { BadRequestError, ConflictError, ForbiddenError, NotFoundError } from '../errors.js';
import type { Logger } from '../log.js';
import { bootstrapClaimed } from './bootstrap.js';
import { ConfigMapLock } from './configmap-lock.js';
import { managedByOf, refuseGitOpsManaged, type ManagedBy } from './gitops.js';
import { isAlreadyExists, isNotFound, isStale } from './host-errors.js';
import type { IdAllocator } from './ids.js';
import { ignoreGone, KindStore } from './kind-store.js';
import { objectNameFor } from './names.js';
import { deleteOwnedSecret, secretValue } from './owned-secrets.js';
import {
  ID_LABEL,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  resourceId,
  type ClusterResource,
  type ClusterSpec,
} from './resources.js';
import type { HostStore } from './store.js';

/** When spec.isDefault was last set through the API (ISO time): the newest default wins a race. */
export const DEFAULT_SINCE_ANNOTATION = 'kiteline.io/default-since';
/** ConfigMap whose atomic creation makes one bootstrap import the winner. */
export const IMPORT_LOCK_CONFIGMAP = 'kiteline-cluster-import-lock';
export const KUBECONFIG_KEY = 'kubeconfig';
/** Label of a Cluster materialised from a source: argocd, capi or clusterprofile. */
export const SOURCE_LABEL = 'kiteline.io/source';
/**
 * Label of a Cluster that is production ("true"): an AI agent's writes there always wait for a
 * human's confirmation, whatever its roles say (docs/mcp.md).
 */
export const PRODUCTION_LABEL = 'kiteline.io/production';
/**
 * Label of a Cluster whose node terminals, exec and attach, kubectl console and deletes need a second
 * factor proved at most this many minutes ago (1 to 1440; docs/second-factors.md).
 */
export const STEP_UP_LABEL = 'kiteline.io/step-up-minutes';

/** The minutes a Cluster's step-up label asks for; undefined when it has none (or not a number in range). */
export function stepUpMinutesOf(labels: Record<string, string> | undefined): number | undefined {
  const raw = labels?.[STEP_UP_LABEL];
  if (raw === undefined || !/^\d{1,4}$/.test(raw)) return undefined;
  const minutes = Number(raw);
  return minutes >= 1 && minutes <= 1440 ? minutes : undefined;
}
/** Annotation naming a sourced Cluster's source object: <namespace>/<name>. */
export const SOURCE_OBJECT_ANNOTATION = 'kiteline.io/source-object';
/** Annotation holding why a sourced Cluster's source cannot be used (its status shows it). */
export const SOURCE_ERROR_ANNOTATION = 'kiteline.io/source-error';
const SOURCE_KINDS: readonly SourceKind[] = ['argocd', 'capi', 'clusterprofile'];
/** How a source kind is named in messages. */
export const SOURCE_NOUNS: Record<SourceKind, string> = {
  argocd: 'Argo CD cluster Secret',
  capi: 'Cluster API kubeconfig Secret',
  clusterprofile: 'ClusterProfile',
};

/** Names clients send as x-cluster-name (also in a cookie or query), e.g. kubernetes-admin@prod. */
const CLUSTER_NAME = /^[A-Za-z0-9]([A-Za-z0-9._@:/-]{0,251}[A-Za-z0-9])?$/;
const NAME_RULE =
  'cluster name must be 1 to 253 characters of letters, digits and . _ @ : / - ' +
  '(starting and ending with a letter or digit)';

/** default-since of a default the leader picked itself: older than any a user sets. */
const FALLBACK_DEFAULT_SINCE = new Date(0).toISOString();

/**
 * A cluster as clients write it: the JSON body of create (name required, config unless inCluster)
 * and of update (any subset; absent members are left as they are). `config` is a kubeconfig.
 */
export interface ClusterInput {
  name?: string;
  description?: string;
  config?: string;
  prometheusURL?: string;
  inCluster?: boolean;
  isDefault?: boolean;
  enabled?: boolean;
  impersonate?: boolean;
}

/** A Cluster object as kiteline reads it: its spec with the defaults applied, and its identity. */
export interface Cluster {
  /** The Cluster object's metadata.name. */
  objectName: string;
  /** 0 while it has none yet (applied with kubectl a moment ago). */
  id: number;
  /** The name clients use: spec.name, else metadata.name. */
  name: string;
  description: string;
  prometheusURL: string;
  inCluster: boolean;
  isDefault: boolean;
  /** When isDefault was last set (ms since epoch; 0 unknown): the newest default wins a tie. */
  defaultSince: number;
  enabled: boolean;
  impersonate: boolean;
  /** Labelled kiteline.io/production=true (PRODUCTION_LABEL). */
  production: boolean;
  /** Labelled kiteline.io/step-up-minutes (STEP_UP_LABEL): a fresh second factor guards its dangerous actions. */
  stepUpMinutes?: number;
  /** Where a cluster materialised from a source comes from; absent for REST and kubectl clusters. */
  source?: ClusterSourceRef;
  /** The GitOps engine's object that applies it from Git (gitops.ts); absent otherwise. */
  managedBy?: ManagedBy;
}

/** The source object of a sourced cluster. */
export interface ClusterSourceRef {
  kind: SourceKind;
  namespace: string;
  name: string;
}

/** This replica's word on a cluster's health (its warm connection, else the recorded status). */
export interface ClusterHealth {
  version: string;
  ready: boolean;
  error: string;
}

/** A Cluster as the admin API shows it (docs/clusters.md); config is never returned. */
export type ClusterView = Omit<Cluster, 'objectName' | 'defaultSince'> & ClusterHealth & { config: '' };

/** The source of a Cluster object, when it was materialised from one. */
export function sourceOf(cr: ClusterResource): ClusterSourceRef | undefined {
  const kind = cr.metadata.labels?.[SOURCE_LABEL] as SourceKind | undefined;
  if (!kind || !SOURCE_KINDS.includes(kind)) return undefined;
  const [namespace = '', ...rest] = (cr.metadata.annotations?.[SOURCE_OBJECT_ANNOTATION] ?? '').split('/');
  return { kind, namespace, name: rest.join('/') };
}

/** "Argo CD cluster Secret argocd/prod", for messages. */
export function describeSource(source: ClusterSourceRef): string {
  return `${SOURCE_NOUNS[source.kind]} ${source.namespace}/${source.name}`;
}

/**
 * The object name of the Cluster a source object materialises as: deterministic, so every replica
 * (and every restart) finds the same object, hence the same id.
 */
export function sourcedObjectName(kind: SourceKind, namespace: string, name: string): string {
  // "source-...": never the name of a cluster registered through the API ("cluster-...").
  return objectNameFor('source', `${kind}.${namespace}.${name}`);
}

/** Where a just-written cluster connects: the host's own credentials, or a sanitized kubeconfig. */
export type WrittenConnection = { inCluster: true } | { inCluster: false; kubeconfig: string | undefined };

/** What the store needs of this replica's warm connections (ClusterManager provides it). */
export interface ClusterConnections {
  health(cr: ClusterResource): ClusterHealth;
  /** Resolves once this replica connected the cluster as just written and probed it once. */
  firstProbeAfterWrite(objectName: string, written: WrittenConnection): Promise<void>;
}

/** What the bootstrap import did. */
export interface ImportResult {
  /** The names registered, in the kubeconfig's order. */
  clusters: string[];
  /** Contexts not registered, with the reason. */
  skipped: { context: string; reason: string }[];
}

/** The name clients use for a Cluster object. */
export function clusterDisplayName(cr: ClusterResource): string {
  return cr.spec?.name || cr.metadata.name;
}

function kubeconfigSecretName(objectName: string): string {
  return `${objectName}-kubeconfig`;
}

/** When this cluster became the default (ms), for breaking a tie between two defaults. */
function defaultSince(cr: ClusterResource): number {
  const raw = cr.metadata.annotations?.[DEFAULT_SINCE_ANNOTATION] ?? cr.metadata.creationTimestamp;
  const ms = raw ? new Date(raw).getTime() : 0;
  return Number.isFinite(ms) ? ms : 0;
}

export function clusterOf(cr: ClusterResource): Cluster {
  const spec = cr.spec ?? {};
  const source = sourceOf(cr);
  const managedBy = managedByOf(cr);
  return {
    ...(source ? { source } : {}),
    ...(managedBy ? { managedBy } : {}),
    objectName: cr.metadata.name,
    id: resourceId(cr) ?? 0,
    name: clusterDisplayName(cr),
    description: spec.description ?? '',
    prometheusURL: spec.prometheusURL ?? '',
    inCluster: spec.inCluster === true,
    isDefault: spec.isDefault === true,
    defaultSince: defaultSince(cr),
    enabled: spec.enabled !== false,
    impersonate: spec.impersonate === true,
    production: cr.metadata.labels?.[PRODUCTION_LABEL] === 'true',
    stepUpMinutes: stepUpMinutesOf(cr.metadata.labels),
  };
}

type DefaultClaim = Pick<Cluster, 'objectName' | 'id' | 'defaultSince'>;

/**
 * The one order between two clusters that both claim to be the default: the one marked default
 * last wins, then the lower id, then the object name (so every replica agrees). True when `a`
 * wins over `b`.
 */
export function preferDefault(a: DefaultClaim, b: DefaultClaim): boolean {
  if (a.defaultSince !== b.defaultSince) return a.defaultSince > b.defaultSince;
  const ia = a.id || Infinity;
  const ib = b.id || Infinity;
  if (ia !== ib) return ia < ib;
  return a.objectName < b.objectName;
}

/** The default among claimants (preferDefault), undefined when none claims it. */
export function pickDefault<T>(
  items: Iterable<T>,
  claim: (item: T) => (DefaultClaim & { isDefault: boolean }) | undefined,
): T | undefined {
  let best: T | undefined;
  for (const item of items) {
    const c = claim(item);
    if (!c?.isDefault) continue;
    if (best === undefined || preferDefault(c, claim(best)!)) best = item;
  }
  return best;
}

function checkName(name: string): string {
  if (!CLUSTER_NAME.test(name)) throw new BadRequestError(NAME_RULE);
  return name;
}

function checkPrometheusURL(url: string | undefined): string {
  if (!url) return '';
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new BadRequestError('prometheusURL must be an http(s) URL');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new BadRequestError('prometheusURL must be an http(s) URL');
  // The spec is no place for a password (it is shown to admins and in kubectl get -o yaml), and
  // kiteline sends no credentials to Prometheus (docs/monitoring.md).
  if (parsed.username || parsed.password) throw new BadRequestError('prometheusURL must not carry user:password@');
  // Refused as a cluster's server is: kiteline connects there (src/monitoring/prometheus.ts).
  if (refusedAddress(parsed.hostname)) throw new BadRequestError(`prometheusURL must not be ${REFUSED_WHY}`);
  return url;
}

/** A kubeconfig as stored (its current context, sanitized); a bad one is a 400 with the reason. */
function sanitizedConfig(config: string): string {
  try {
    return sanitizeKubeconfig(config).kubeconfig;
  } catch (err) {
    if (err instanceof KubeconfigError) throw new BadRequestError(`invalid kubeconfig: ${err.message}`);
    throw err;
  }
}

/** A cluster to create, checked: every member decided, the kubeconfig sanitized. */
/** A cluster the admin API creates (production is a label, set with kubectl or GitOps). */
interface NewCluster extends Omit<Cluster, 'objectName' | 'id' | 'defaultSince' | 'production' | 'stepUpMinutes'> {
  /** Sanitized single-context kubeconfig; absent for inCluster. */
  kubeconfig?: string;
}

/**
 * The admin API leaves a cluster to whoever owns it: a sourced cluster to its source, a cluster
 * applied from Git to its GitOps engine (gitops.ts). 409 naming the owner.
 */
function refuseForeign(cr: ClusterResource, verb: 'changed' | 'deleted'): void {
  refuseGitOpsManaged(cr, `cluster "${clusterDisplayName(cr)}"`, verb);
  const source = sourceOf(cr);
  if (!source) return;
  throw new ConflictError(
    `cluster "${clusterDisplayName(cr)}" comes from the ${describeSource(source)} and cannot be ${verb} here ` +
      `(only made the default); change or delete it there`,
  );
}

const importClosed = () => new ForbiddenError('import not allowed when clusters exist');

/** The longest source error kept on a sourced Cluster (annotation). */
const MAX_SOURCE_ERROR = 1024;

export class ClusterStore extends KindStore<ClusterResource> {
  private readonly log: Logger;
  private readonly importLock: ConfigMapLock;

  constructor(
    host: HostStore,
    ids: IdAllocator,
    private readonly connections: ClusterConnections,
    log: Logger,
  ) {
    super(host, ids, {
      plural: 'clusters',
      kind: 'Cluster',
      noun: 'cluster',
      keyOf: clusterDisplayName,
      cache: (h) => h.clusters,
    });
    this.log = log.child({ component: 'cluster-store' });
    this.importLock = new ConfigMapLock(host, IMPORT_LOCK_CONFIGMAP);
  }

  /**
   * Cluster objects that have an id, ordered by id. Unlike other kinds, two objects claiming one
   * name are both listed (the reconciler reports the shadowed one's NameConflict in its status,
   * and an admin renames or deletes it by id).
   */
  override list(): ClusterResource[] {
    return this.cache
      .list()
      .filter((cr) => resourceId(cr) !== undefined)
      .sort((a, b) => resourceId(a)! - resourceId(b)! || a.metadata.name.localeCompare(b.metadata.name));
  }

  override byId(id: number): ClusterResource | undefined {
    return this.list().find((cr) => resourceId(cr) === id);
  }

  private find(id: number): ClusterResource {
    const cr = this.byId(id);
    if (!cr) throw new NotFoundError('cluster not found');
    return cr;
  }

  /** Is the name used by any Cluster object (its spec.name or, without one, its metadata.name)? */
  private nameTaken(name: string, exceptObject?: string): boolean {
    return this.cache.list().some((cr) => cr.metadata.name !== exceptObject && clusterDisplayName(cr) === name);
  }

  // ---- views ----

  view(cr: ClusterResource): ClusterView {
    const cluster = clusterOf(cr);
    const { id, name, description, prometheusURL, inCluster, isDefault, enabled, impersonate, production } = cluster;
    const { source, managedBy } = cluster;
    const { version, ready, error } = this.connections.health(cr);
    return {
      ...(source ? { source } : {}),
      ...(managedBy ? { managedBy } : {}),
      id,
      name,
      description,
      config: '',
      prometheusURL,
      inCluster,
      isDefault,
      enabled,
      impersonate,
      production,
      version,
      ready,
      error,
    };
  }

  /** Every cluster with an id, by id, as the admin API shows it. */
  views(): ClusterView[] {
    return this.list().map((cr) => this.view(cr));
  }

  // ---- writes ----

  /**
   * Registers a cluster (POST): checked whole, created under a fresh id with its kubeconfig
   * Secret; the first cluster is the default, a new default clears the others. Returns once this
   * replica's cache holds it and (when enabled) its connection was probed.
   */
  async create(input: ClusterInput): Promise<Cluster> {
    const name = checkName(input.name ?? '');
    const inCluster = input.inCluster === true;
    if (inCluster && input.config) throw new BadRequestError('give either config or inCluster: true, not both');
    if (!inCluster && !input.config)
      throw new BadRequestError('config (a kubeconfig) is required unless inCluster is true');
    const cluster: NewCluster = {
      name,
      description: input.description ?? '',
      prometheusURL: checkPrometheusURL(input.prometheusURL),
      inCluster,
      // The first cluster is the default: there is always exactly one when any exist.
      isDefault: input.isDefault === true || !this.any(),
      enabled: input.enabled !== false,
      impersonate: input.impersonate === true,
      ...(inCluster ? {} : { kubeconfig: sanitizedConfig(input.config!) }),
    };
    const created = await this.createCluster(cluster);
    if (cluster.isDefault) await this.settleDefaults();
    if (cluster.enabled) await this.connections.firstProbeAfterWrite(created.metadata.name, connectionOf(cluster));
    return clusterOf(created);
  }

  /** The Cluster object and its Secret; duplicate name: 409 AlreadyExists. */
  private async createCluster(cluster: NewCluster): Promise<ClusterResource> {
    if (this.nameTaken(cluster.name)) throw this.alreadyExists(cluster.name);
    return this.createWithId(
      cluster.name,
      (id) => {
        let objectName = objectNameFor('cluster', cluster.name);
        const occupant = this.cache.get(objectName);
        // A renamed cluster keeps its object name; a new cluster with its old name gets a distinct one.
        if (occupant && clusterDisplayName(occupant) !== cluster.name) objectName = `${objectName}-${id}`.slice(0, 253);
        const spec: ClusterSpec = {
          name: cluster.name,
          description: cluster.description,
          prometheusURL: cluster.prometheusURL,
          inCluster: cluster.inCluster,
          isDefault: cluster.isDefault,
          enabled: cluster.enabled,
          impersonate: cluster.impersonate,
        };
        if (!cluster.inCluster)
          spec.kubeconfigSecretRef = { name: kubeconfigSecretName(objectName), key: KUBECONFIG_KEY };
        return {
          metadata: {
            name: objectName,
            namespace: this.host.namespace,
            ...(cluster.isDefault ? { annotations: { [DEFAULT_SINCE_ANNOTATION]: new Date().toISOString() } } : {}),
          },
          spec,
        };
      },
      cluster.kubeconfig === undefined
        ? undefined
        : (created) => ({
            name: created.spec.kubeconfigSecretRef!.name,
            values: { [KUBECONFIG_KEY]: cluster.kubeconfig! },
          }),
    );
  }

  /**
   * Changes a cluster (PUT): every rule checked on the live object inside one compare-and-swap
   * (a taken name: 409; unsetting the default: 400; inCluster and config exclusive), then its
   * kubeconfig Secret; a new default clears the others. Returns once the cache holds it and, when
   * the change (re)connects it, once this replica probed it.
   */
  async update(id: number, input: ClusterInput): Promise<Cluster> {
    const cr = this.find(id);
    // Which cluster is the default is kiteline's choice, not the source's: the one change allowed
    // (a cluster from Git has isDefault in Git: no change at all).
    refuseGitOpsManaged(cr, `cluster "${clusterDisplayName(cr)}"`, 'changed');
    const onlyDefault = Object.entries(input).every(([k, v]) => v === undefined || (k === 'isDefault' && v === true));
    if (!onlyDefault) refuseForeign(cr, 'changed');
    const kubeconfig = input.config ? sanitizedConfig(input.config) : undefined;
    const prometheusURL = input.prometheusURL === undefined ? undefined : checkPrometheusURL(input.prometheusURL);
    const updated = await this.swap(cr, (live) => {
      const spec: ClusterSpec = {};
      const annotations: Record<string, string> = {};
      if (input.name && input.name !== clusterDisplayName(live)) {
        spec.name = checkName(input.name);
        if (this.nameTaken(spec.name, live.metadata.name)) throw this.alreadyExists(spec.name);
      }
      if (input.description !== undefined) spec.description = input.description;
      if (prometheusURL !== undefined) spec.prometheusURL = prometheusURL;
      if (input.enabled !== undefined) spec.enabled = input.enabled;
      if (input.impersonate !== undefined) spec.impersonate = input.impersonate;
      if (input.isDefault !== undefined) {
        if (!input.isDefault && live.spec?.isDefault) {
          throw new BadRequestError('there must be a default cluster: mark another cluster as default instead');
        }
        if (input.isDefault && !live.spec?.isDefault) annotations[DEFAULT_SINCE_ANNOTATION] = new Date().toISOString();
        spec.isDefault = input.isDefault;
      }
      if (input.inCluster !== undefined) spec.inCluster = input.inCluster;
      const inCluster = spec.inCluster ?? live.spec?.inCluster === true;
      if (kubeconfig !== undefined) {
        if (inCluster)
          throw new BadRequestError('an inCluster cluster takes no config; set inCluster: false to use one');
        if (!live.spec?.kubeconfigSecretRef)
          spec.kubeconfigSecretRef = { name: kubeconfigSecretName(live.metadata.name), key: KUBECONFIG_KEY };
      } else if (!inCluster && !live.spec?.kubeconfigSecretRef) {
        throw new BadRequestError('config (a kubeconfig) is required when inCluster is false');
      }
      return { spec, ...(Object.keys(annotations).length > 0 ? { metadata: { annotations } } : {}) };
    });
    if (kubeconfig !== undefined) {
      const ref = updated.spec.kubeconfigSecretRef!;
      await this.writeSecret(updated, { name: ref.name, values: { [ref.key || KUBECONFIG_KEY]: kubeconfig } });
    }
    if (input.isDefault) await this.settleDefaults();
    const reconnects = kubeconfig !== undefined || input.inCluster !== undefined || input.enabled === true;
    const cluster = clusterOf(updated);
    if (reconnects && cluster.enabled) {
      await this.connections.firstProbeAfterWrite(
        updated.metadata.name,
        cluster.inCluster ? { inCluster: true } : { inCluster: false, kubeconfig },
      );
    }
    return cluster;
  }

  /**
   * Deletes a cluster and the kubeconfig Secret kiteline made for it. The default cluster cannot
   * be deleted (400): the check and the delete are one compare-and-swap (a delete preconditioned
   * on the resourceVersion that was checked), so a replica making this cluster the default
   * meanwhile makes the delete fail and be checked again, never leaves no default.
   */
  /**
   * The Clusters as the API server has them now (a list, not the cache): for a name the cache may
   * not show yet.
   */
  listLive(): Promise<ClusterResource[]> {
    return this.crs.list();
  }

  async delete(id: number): Promise<Cluster> {
    const cr = this.find(id);
    refuseForeign(cr, 'deleted');
    const gone = await this.remove(cr, cr.spec?.kubeconfigSecretRef?.name, (live) => {
      refuseForeign(live, 'deleted');
      if (live.spec?.isDefault)
        throw new BadRequestError('cannot delete default cluster: mark another cluster as default first');
    });
    return clusterOf(gone);
  }

  /**
   * Exactly one default cluster. Among the clusters marked default (read from the API server,
   * not the cache, so two writers racing always see each other's mark at least once), the one
   * preferDefault picks keeps it and every other is cleared, each clear a compare-and-swap that
   * is skipped when that cluster was marked default again meanwhile. With no default left (a
   * kubectl delete), one is marked: an enabled cluster, lowest id first, dated from the epoch so
   * any default a user sets wins over it. Called after every write that marks a default and by
   * the leader after every change.
   */
  async settleDefaults(): Promise<void> {
    const all = await this.crs.list();
    const defaults = all.filter((cr) => cr.spec?.isDefault);
    if (defaults.length > 1) {
      const keep = clusterOf(pickDefault(defaults, clusterOf)!);
      for (const cr of defaults) {
        // A cluster from Git keeps Git's flag (clearing it would only be undone on the next sync):
        // both then claim the default, and pickDefault's order decides it the same everywhere.
        if (cr.metadata.name === keep.objectName || managedByOf(cr)) continue;
        this.log.info(
          { cluster: clusterDisplayName(cr), keep: keep.name },
          'more than one default cluster; clearing the older',
        );
        const loses = (live: ClusterResource) => live.spec?.isDefault === true && preferDefault(keep, clusterOf(live));
        await this.swap(cr, (live) => (loses(live) ? { spec: { isDefault: false } } : undefined)).catch(ignoreGone);
      }
    } else if (defaults.length === 0 && all.length > 0) {
      const disabled = (cr: ClusterResource) => Number(cr.spec?.enabled === false);
      const fromGit = (cr: ClusterResource) => Number(managedByOf(cr) !== undefined);
      const pick = [...all].sort(
        (a, b) =>
          disabled(a) - disabled(b) ||
          fromGit(a) - fromGit(b) ||
          (resourceId(a) ?? Infinity) - (resourceId(b) ?? Infinity),
      )[0];
      this.log.info({ cluster: clusterDisplayName(pick) }, 'no default cluster; marking one');
      const mark = {
        metadata: { annotations: { [DEFAULT_SINCE_ANNOTATION]: FALLBACK_DEFAULT_SINCE } },
        spec: { isDefault: true },
      };
      await this.swap(pick, (live) => (live.spec?.isDefault ? undefined : mark)).catch(ignoreGone);
    }
  }

  /**
   * Writes a Cluster's status (compare-and-swap on the object's resourceVersion): false when it lost or the
   * object is gone.
   */
  async writeStatus(cr: ClusterResource): Promise<boolean> {
    try {
      await this.crs.replaceStatus(cr);
      return true;
    } catch (err) {
      if (isStale(err) || isNotFound(err)) return false;
      throw err;
    }
  }

  // ---- clusters from sources (clusters/sources.ts calls these, on the leader) ----

  /** The Cluster objects materialised from sources, id or not. */
  sourced(): ClusterResource[] {
    return this.cache.list().filter((cr) => sourceOf(cr) !== undefined);
  }

  /**
   * Makes the Cluster object of a source object match it: created (with a fresh id, its
   * kubeconfig Secret owned by it) when missing, else its name, source error and Secret updated;
   * nothing is written when all match. The Secret is written before the object, so a rotated
   * credential reaches the reconciler (a Secret event) at once. Returns once the cache holds it.
   */
  async applySource(desired: SourceCluster): Promise<void> {
    const objectName = sourcedObjectName(desired.kind, desired.namespace, desired.objectName);
    const secretName = kubeconfigSecretName(objectName);
    let error = desired.error ?? '';
    let name = desired.clusterName;
    if (!CLUSTER_NAME.test(name)) {
      error ||= `the source's cluster name is not usable: ${NAME_RULE}`;
      name = objectName;
    }
    const annotations: Record<string, string | null> = {
      [SOURCE_OBJECT_ANNOTATION]: `${desired.namespace}/${desired.objectName}`,
      // Bounded: a message may quote the source's own text, and an object has a size limit.
      [SOURCE_ERROR_ANNOTATION]: error ? error.slice(0, MAX_SOURCE_ERROR) : null,
    };
    const usable = desired.kubeconfig !== undefined && !error;
    const existing = this.cache.get(objectName);
    if (!existing) {
      const id = await this.ids.next('clusters', this.index.maxId());
      const initial = Object.entries(annotations).filter((e): e is [string, string] => e[1] !== null);
      let created: ClusterResource;
      try {
        created = await this.crs.create({
          metadata: {
            name: objectName,
            namespace: this.host.namespace,
            labels: { [ID_LABEL]: String(id), [MANAGED_BY_LABEL]: MANAGED_BY, [SOURCE_LABEL]: desired.kind },
            annotations: Object.fromEntries(initial),
          },
          spec: { name, enabled: true, kubeconfigSecretRef: { name: secretName, key: KUBECONFIG_KEY } },
        });
      } catch (err) {
        if (isAlreadyExists(err)) return; // another writer made it; its watch event brings the next pass
        throw err;
      }
      this.log.info({ cluster: name, source: describeSource(sourceOf(created)!) }, 'cluster added from its source');
      if (usable)
        await this.writeSecret(created, { name: secretName, values: { [KUBECONFIG_KEY]: desired.kubeconfig! } });
      await this.written(created);
      return;
    }
    const current = existing.metadata.annotations ?? {};
    if (
      existing.metadata.labels?.[SOURCE_LABEL] !== desired.kind ||
      current[SOURCE_OBJECT_ANNOTATION] !== annotations[SOURCE_OBJECT_ANNOTATION]
    ) {
      // Someone else's object holds the name (applied with kubectl): never taken over.
      this.log.warn(
        { object: objectName },
        'a Cluster object not made from this source holds its name; source skipped',
      );
      return;
    }
    const stored = this.host.secrets.get(secretName, this.host.namespace);
    if (usable && secretValue(stored, KUBECONFIG_KEY) !== desired.kubeconfig) {
      await this.writeSecret(existing, { name: secretName, values: { [KUBECONFIG_KEY]: desired.kubeconfig! } });
      this.log.info({ cluster: name }, 'cluster credentials rotated by its source');
    } else if (!usable && stored) {
      // An unusable source keeps no credential of its last good state around.
      await deleteOwnedSecret(this.host.core, this.host.namespace, stored);
    }
    const same =
      clusterDisplayName(existing) === name &&
      (current[SOURCE_ERROR_ANNOTATION] ?? '') === error &&
      existing.spec?.kubeconfigSecretRef?.name === secretName &&
      existing.spec?.inCluster !== true &&
      existing.spec?.enabled !== false;
    if (same) return;
    await this.patch(existing, {
      metadata: { labels: { [SOURCE_LABEL]: desired.kind }, annotations },
      spec: { name, enabled: true, inCluster: false, kubeconfigSecretRef: { name: secretName, key: KUBECONFIG_KEY } },
    });
    this.log.info({ cluster: name, error: error || undefined }, 'cluster updated from its source');
  }

  /** Deletes a sourced Cluster object (its source is gone) and the kubeconfig Secret made for it. */
  async removeSource(cr: ClusterResource): Promise<void> {
    const secret = this.host.secrets.get(kubeconfigSecretName(cr.metadata.name), this.host.namespace);
    try {
      await this.crs.delete(cr.metadata.name, cr.metadata.uid);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    await deleteOwnedSecret(this.host.core, this.host.namespace, secret);
    this.log.info({ cluster: clusterDisplayName(cr) }, 'cluster removed: its source is gone');
  }

  // ---- the bootstrap import ----

  /** Does any Cluster object exist (with an id or not yet)? */
  any(): boolean {
    return this.cache.list().length > 0;
  }

  /** The import is open while no cluster exists (also when the import lock is still held). */
  importOpen(): boolean {
    return !this.any();
  }

  /** True once a super user was ever created here: set-up is over, the import needs an admin. */
  setupOver(): Promise<boolean> {
    return bootstrapClaimed(this.host);
  }

  /**
   * Registers the first clusters: one per usable kubeconfig context (the current one the default)
   * or the host cluster itself. Everything is checked before the import lock is taken, so a bad
   * request never closes the import; of concurrent imports, the one that creates the lock wins
   * and the others get 403, as does any import once a cluster exists. Returns once the clusters
   * were probed.
   */
  async importClusters(input: Pick<ClusterInput, 'config' | 'inCluster'>, holder: string): Promise<ImportResult> {
    if (!this.importOpen()) throw importClosed();
    const { planned, skipped } = importPlan(input);
    if (!(await this.importLock.acquire({ holder, at: new Date().toISOString() }))) throw importClosed();
    if (!this.importOpen()) throw importClosed();
    const created: Array<{ cr: ClusterResource; cluster: NewCluster }> = [];
    try {
      // The default first: the leader never sees clusters without a default (it would mark another).
      for (const cluster of [...planned].sort((x, y) => Number(y.isDefault) - Number(x.isDefault))) {
        created.push({ cr: await this.createCluster(cluster), cluster });
      }
    } finally {
      if (created.length === 0) await this.importLock.release().catch(() => undefined);
    }
    await Promise.all(
      created.map(({ cr, cluster }) => this.connections.firstProbeAfterWrite(cr.metadata.name, connectionOf(cluster))),
    );
    const names = new Set(created.map(({ cluster }) => cluster.name));
    return { clusters: planned.map((p) => p.name).filter((name) => names.has(name)), skipped };
  }

  /**
   * Opens the import again when no cluster is left and the lock is older than `staleMs` (the
   * leader calls this): true when it removed the lock.
   */
  async reopenImportIfStale(staleMs: number): Promise<boolean> {
    if (this.any()) return false;
    const createdAt = await this.importLock.createdAt();
    if (!createdAt || Date.now() - createdAt.getTime() <= staleMs) return false;
    await this.importLock.release();
    return true;
  }
}

/** How a cluster written with these fields connects (see ClusterConnections.firstProbeAfterWrite). */
function connectionOf(cluster: { inCluster: boolean; kubeconfig?: string | undefined }): WrittenConnection {
  return cluster.inCluster ? { inCluster: true } : { inCluster: false, kubeconfig: cluster.kubeconfig };
}

/** The clusters an import would create, checked whole; nothing usable: 400 with the reasons. */
function importPlan(input: Pick<ClusterInput, 'config' | 'inCluster'>): {
  planned: NewCluster[];
  skipped: ImportResult['skipped'];
} {
  const inCluster = input.inCluster === true;
  if (!inCluster && !input.config) throw new BadRequestError('send config (a kubeconfig) or inCluster: true');
  if (inCluster && input.config) throw new BadRequestError('give either config or inCluster: true, not both');
  const base = { description: '', prometheusURL: '', enabled: true, impersonate: false, isDefault: false };
  if (inCluster) {
    return {
      planned: [
        { ...base, name: 'in-cluster', inCluster: true, isDefault: true, description: 'the cluster kiteline runs in' },
      ],
      skipped: [],
    };
  }
  let all: ReturnType<typeof sanitizeAllContexts>;
  try {
    all = sanitizeAllContexts(input.config!);
  } catch (err) {
    if (err instanceof KubeconfigError) throw new BadRequestError(`invalid kubeconfig: ${err.message}`);
    throw err;
  }
  const planned: NewCluster[] = [];
  const skipped: ImportResult['skipped'] = [];
  for (const ctx of all.usable) {
    if (!CLUSTER_NAME.test(ctx.context)) {
      skipped.push({ context: ctx.context, reason: NAME_RULE });
      continue;
    }
    planned.push({
      ...base,
      name: ctx.context,
      inCluster: false,
      kubeconfig: ctx.kubeconfig,
      isDefault: ctx.context === all.current,
    });
  }
  skipped.push(...all.skipped);
  if (planned.length === 0) {
    const reasons = skipped.map((s) => `${s.context}: ${s.reason}`).join('; ');
    throw new BadRequestError(`invalid kubeconfig: no usable context${reasons ? ` (${reasons})` : ''}`);
  }
  if (!planned.some((p) => p.isDefault)) planned[0].isDefault = true;
  return { planned, skipped };
}
