// The kinds the global search (GET /api/v1/search) indexes, in the order its results list them, with
// the words that name each kind at the start of a query ("pod web", "cm settings": Kite's kind
// prefixes plus kubectl's short names). Kite searched pods, deployments, services, configmaps,
// secrets, persistentvolumes, persistentvolumeclaims, daemonsets, nodes and horizontalpodautoscalers;
// its UI also shows namespaces, jobs and ingresses, and statefulsets and cronjobs are asked for as often.
// Every kind is resolved through the cluster's discovery (its version differs between clusters:
// cronjobs are batch/v1beta1 on Kubernetes 1.20); a kind the cluster does not serve is left out.

export interface SearchKind {
  /** The plural resource name: the path segment Kite's UI links to and the name roles match. */
  resource: string;
  /** Words that restrict a query to this kind when it starts with one of them and a space. */
  aliases: readonly string[];
}

/** In result order (Kite's order first: deployments, pods, daemonsets, statefulsets, configmaps, ...). */
export const SEARCH_KINDS: readonly SearchKind[] = [
  { resource: 'deployments', aliases: ['dep', 'deploy', 'deployment', 'deployments'] },
  { resource: 'pods', aliases: ['po', 'pod', 'pods'] },
  { resource: 'daemonsets', aliases: ['ds', 'daemonset', 'daemonsets'] },
  { resource: 'statefulsets', aliases: ['sts', 'statefulset', 'statefulsets'] },
  { resource: 'configmaps', aliases: ['cm', 'configmap', 'configmaps'] },
  { resource: 'services', aliases: ['svc', 'service', 'services'] },
  { resource: 'secrets', aliases: ['secret', 'secrets'] },
  { resource: 'ingresses', aliases: ['ing', 'ingress', 'ingresses'] },
  { resource: 'namespaces', aliases: ['ns', 'namespace', 'namespaces'] },
  { resource: 'jobs', aliases: ['job', 'jobs'] },
  { resource: 'cronjobs', aliases: ['cj', 'cronjob', 'cronjobs'] },
  { resource: 'persistentvolumeclaims', aliases: ['pvc', 'persistentvolumeclaim', 'persistentvolumeclaims'] },
  { resource: 'persistentvolumes', aliases: ['pv', 'persistentvolume', 'persistentvolumes'] },
  { resource: 'nodes', aliases: ['no', 'node', 'nodes'] },
  { resource: 'horizontalpodautoscalers', aliases: ['hpa', 'horizontalpodautoscaler', 'horizontalpodautoscalers'] },
];

/** The position of each kind in the results. */
export const KIND_ORDER: ReadonlyMap<string, number> = new Map(
  SEARCH_KINDS.map((kind, position) => [kind.resource, position]),
);

/** The kind a word names ("po", "cm", "deploy"), if any. */
export function kindNamed(word: string): SearchKind | undefined {
  const lower = word.toLowerCase();
  return SEARCH_KINDS.find((kind) => kind.aliases.includes(lower));
}
