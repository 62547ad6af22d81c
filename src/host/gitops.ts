// Who owns an object kiteline keeps: a GitOps engine that applied it from Git, or kiteline itself.
// A Cluster, User or Role applied by Flux or Argo CD is the engine's (docs/gitops.md): the admin
// API shows `managedBy` and refuses to change or delete it (409 naming the owner) instead of
// fighting a reconciler that would put Git's version back. kiteline's own bookkeeping (its id
// label, status, sign-in records, ending sessions, a password in its own Secret) still writes.
//
// What marks an object, in the engines' own terms:
//   - Flux's kustomize-controller labels what it applies kustomize.toolkit.fluxcd.io/name and
//     /namespace (its Kustomization); helm-controller labels helm.toolkit.fluxcd.io/name and
//     /namespace (its HelmRelease).
//   - Argo CD's resource tracking annotation argocd.argoproj.io/tracking-id,
//     "<application>:<group>/<kind>:<namespace>/<name>" (the default since Argo CD 3.0); with label
//     tracking, the field manager argocd-controller in managedFields.
//   - Otherwise the field managers those controllers apply with (kustomize-controller,
//     helm-controller, argocd-controller): the owner's name is then unknown.
import type { V1ObjectMeta } from '@kubernetes/client-node';
import { ConflictError } from '../errors.js';

export type GitOpsTool = 'flux' | 'argocd';

/** The GitOps object that applies an object: Flux's Kustomization or HelmRelease, Argo CD's Application. */
export interface ManagedBy {
  tool: GitOpsTool;
  kind: 'Kustomization' | 'HelmRelease' | 'Application';
  /** The owner's namespace and name; "" when only a field manager tells the tool. */
  namespace: string;
  name: string;
}

const FLUX_LABELS = [
  { kind: 'Kustomization', prefix: 'kustomize.toolkit.fluxcd.io' },
  { kind: 'HelmRelease', prefix: 'helm.toolkit.fluxcd.io' },
] as const;
export const ARGOCD_TRACKING_ANNOTATION = 'argocd.argoproj.io/tracking-id';
const FIELD_MANAGERS: Record<string, Omit<ManagedBy, 'namespace' | 'name'>> = {
  'kustomize-controller': { tool: 'flux', kind: 'Kustomization' },
  'helm-controller': { tool: 'flux', kind: 'HelmRelease' },
  'argocd-controller': { tool: 'argocd', kind: 'Application' },
};

/** The GitOps owner of an object, undefined when none applied it (the API, kubectl, a source). */
export function managedByOf(obj: { metadata?: V1ObjectMeta }): ManagedBy | undefined {
  const labels = obj.metadata?.labels ?? {};
  for (const { kind, prefix } of FLUX_LABELS) {
    const name = labels[`${prefix}/name`];
    if (name) return { tool: 'flux', kind, namespace: labels[`${prefix}/namespace`] ?? '', name };
  }
  const tracking = obj.metadata?.annotations?.[ARGOCD_TRACKING_ANNOTATION];
  if (tracking) {
    // "<application>:..." where an application outside Argo CD's own namespace is "<ns>_<name>".
    const colon = tracking.indexOf(':');
    const app = colon < 0 ? tracking : tracking.slice(0, colon);
    const split = app.indexOf('_');
    return split > 0
      ? { tool: 'argocd', kind: 'Application', namespace: app.slice(0, split), name: app.slice(split + 1) }
      : { tool: 'argocd', kind: 'Application', namespace: '', name: app };
  }
  for (const entry of obj.metadata?.managedFields ?? []) {
    const known = entry.manager ? FIELD_MANAGERS[entry.manager] : undefined;
    if (known) return { ...known, namespace: '', name: '' };
  }
  return undefined;
}

/** "Flux Kustomization flux-system/kiteline", "Argo CD Application clusters", for messages. */
export function describeManagedBy(owner: ManagedBy): string {
  const tool = owner.tool === 'flux' ? 'Flux' : 'Argo CD';
  const name = owner.namespace ? `${owner.namespace}/${owner.name}` : owner.name;
  return name
    ? `${tool} ${owner.kind} ${name}`
    : `${tool} (${owner.kind === 'Application' ? 'an' : 'a'} ${owner.kind})`;
}

/**
 * 409 when a GitOps engine owns the object: `what` is how the message names it ('cluster "prod"'),
 * `verb` what was refused. The message names the owner and where to make the change.
 */
export function refuseGitOpsManaged(obj: { metadata?: V1ObjectMeta }, what: string, verb: 'changed' | 'deleted'): void {
  const owner = managedByOf(obj);
  if (!owner) return;
  throw new ConflictError(
    `${what} is managed by GitOps (${describeManagedBy(owner)}) and cannot be ${verb} here: ` +
      `change it in Git, or the ${owner.tool === 'flux' ? 'Flux' : 'Argo CD'} reconciler puts it back`,
  );
}
