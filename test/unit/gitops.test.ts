// Who owns an object (src/host/gitops.ts): the marks Flux and Argo CD leave on what they apply,
// and the 409 the admin API answers for such an object. test/gitops.test.ts runs real Flux.
import t from 'tap';
import { ConflictError } from '../../src/errors.js';
import { describeManagedBy, managedByOf, refuseGitOpsManaged } from '../../src/host/gitops.js';

const object = (metadata: Record<string, unknown>) => ({ metadata: { name: 'x', ...metadata } });

t.test('the marks of each engine', async (t) => {
  t.same(
    managedByOf(
      object({
        labels: { 'kustomize.toolkit.fluxcd.io/name': 'apps', 'kustomize.toolkit.fluxcd.io/namespace': 'flux' },
      }),
    ),
    { tool: 'flux', kind: 'Kustomization', namespace: 'flux', name: 'apps' },
    "Flux's Kustomization labels",
  );
  t.same(
    managedByOf(
      object({ labels: { 'helm.toolkit.fluxcd.io/name': 'kl', 'helm.toolkit.fluxcd.io/namespace': 'kiteline' } }),
    ),
    { tool: 'flux', kind: 'HelmRelease', namespace: 'kiteline', name: 'kl' },
    "Flux's HelmRelease labels",
  );
  t.same(
    managedByOf(object({ annotations: { 'argocd.argoproj.io/tracking-id': 'fleet:kiteline.io/Cluster:kl/prod' } })),
    { tool: 'argocd', kind: 'Application', namespace: '', name: 'fleet' },
    "Argo CD's tracking annotation",
  );
  t.same(
    managedByOf(object({ annotations: { 'argocd.argoproj.io/tracking-id': 'team-a_fleet:kiteline.io/Cluster:kl/x' } })),
    { tool: 'argocd', kind: 'Application', namespace: 'team-a', name: 'fleet' },
    'an Application outside Argo CD\'s namespace ("<ns>_<name>")',
  );
  t.same(
    managedByOf(
      object({ managedFields: [{ manager: 'kubectl-client-side-apply' }, { manager: 'argocd-controller' }] }),
    ),
    { tool: 'argocd', kind: 'Application', namespace: '', name: '' },
    'only a field manager: the tool, owner unknown',
  );
  t.equal(
    managedByOf(
      object({ labels: { 'app.kubernetes.io/managed-by': 'kiteline' }, managedFields: [{ manager: 'kubectl' }] }),
    ),
    undefined,
    'kiteline, kubectl: no GitOps owner',
  );
  t.equal(
    managedByOf(object({ labels: { 'kustomize.toolkit.fluxcd.io/name': '' } })),
    undefined,
    'an empty label is no mark',
  );
  t.equal(managedByOf({}), undefined, 'no metadata');
});

t.test('the refusal names the owner', async (t) => {
  const owned = object({
    labels: { 'kustomize.toolkit.fluxcd.io/name': 'kiteline', 'kustomize.toolkit.fluxcd.io/namespace': 'flux-system' },
  });
  const err = t.throws(() => refuseGitOpsManaged(owned, 'cluster "prod"', 'deleted')) as ConflictError;
  t.ok(err instanceof ConflictError, '409');
  t.match(
    err.message,
    /^cluster "prod" is managed by GitOps \(Flux Kustomization flux-system\/kiteline\) and cannot be deleted here/,
  );
  t.doesNotThrow(
    () => refuseGitOpsManaged(object({}), 'cluster "prod"', 'changed'),
    'nothing for an object of kiteline',
  );
  t.equal(
    describeManagedBy({ tool: 'argocd', kind: 'Application', namespace: '', name: '' }),
    'Argo CD (an Application)',
  );
});
