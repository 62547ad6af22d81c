// The pure parts of Helm support (docs/helm.md): decoding Helm's release Secrets as Helm's storage
// driver writes them (base64 of gzipped JSON, inside the Secret's own base64), the newest revision
// per release, and the HTTP error each Helm failure message becomes.
import t from 'tap';
import { gzipSync } from 'node:zlib';
import { helmFailure, helmMessage } from '../../src/helm/helm-cli.js';
import {
  decodeReleaseSecret,
  historyItem,
  newestRevisions,
  newestSecrets,
  releaseView,
} from '../../src/helm/releases.js';

/** A Secret as Helm's secret driver stores a release. */
function releaseSecret(release: { name?: string; namespace?: string; version?: number }, gzip = true): object {
  const json = Buffer.from(JSON.stringify(release));
  const encoded = (gzip ? gzipSync(json) : json).toString('base64');
  return {
    type: 'helm.sh/release.v1',
    metadata: {
      namespace: release.namespace,
      labels: { owner: 'helm', ...(release.name ? { name: release.name } : {}), version: String(release.version) },
    },
    data: { release: Buffer.from(encoded).toString('base64') },
  };
}

const record = (name: string, namespace: string, version: number, status: string) => ({
  name,
  namespace,
  version,
  info: { status, last_deployed: `2026-11-28T10:0${version}:00Z`, description: `rev ${version}` },
  chart: { metadata: { name: 'hello', version: `0.${version}.0`, appVersion: '1.0' } },
  config: { greeting: 'hi' },
  manifest: 'kind: ConfigMap',
});

t.test('a release Secret decodes as Helm wrote it, gzipped or plain', async (t) => {
  const decoded = decodeReleaseSecret(releaseSecret(record('web', 'shop', 2, 'deployed')) as never);
  t.match(decoded, { name: 'web', namespace: 'shop', version: 2 });
  t.same(historyItem(decoded!), {
    revision: 2,
    status: 'deployed',
    chart: 'hello-0.2.0',
    chartName: 'hello',
    chartVersion: '0.2.0',
    appVersion: '1.0',
    description: 'rev 2',
    lastDeployed: '2026-11-28T10:02:00Z',
  });
  t.match(releaseView(decoded!, true), {
    kind: 'HelmRelease',
    metadata: { name: 'web', namespace: 'shop' },
    spec: { releaseName: 'web', revision: 2, values: { greeting: 'hi' }, manifest: 'kind: ConfigMap', hooks: [] },
    status: { status: 'deployed' },
  });
  t.notOk('values' in releaseView(decoded!).spec, 'a list item carries no values');
  t.match(decodeReleaseSecret(releaseSecret(record('old', 'shop', 1, 'deployed'), false) as never), { name: 'old' });
});

t.test('anything else is skipped, never a failure', async (t) => {
  t.equal(decodeReleaseSecret({ type: 'Opaque', data: { release: 'eA==' } }), undefined, 'another type');
  t.equal(decodeReleaseSecret({ type: 'helm.sh/release.v1', data: {} }), undefined, 'no release key');
  const garbage = Buffer.from(Buffer.from('not json').toString('base64')).toString('base64');
  t.equal(decodeReleaseSecret({ type: 'helm.sh/release.v1', data: { release: garbage } }), undefined);
  t.equal(decodeReleaseSecret(releaseSecret({ name: 'x' }) as never), undefined, 'no revision number');
});

t.test('where the Secret is counts, not what its JSON claims', async (t) => {
  const forged = releaseSecret(record('web', 'kube-system', 9, 'deployed')) as { metadata: { namespace: string } };
  forged.metadata.namespace = 'team-x';
  t.match(decodeReleaseSecret(forged), { namespace: 'team-x', name: 'web' });
  const secrets = [1, 3, 2].map((v) => releaseSecret(record('web', 'shop', v, 'deployed')));
  t.same(
    newestSecrets(secrets as never).map((s) => s.metadata?.labels?.version),
    ['3'],
    'a list decodes only the newest revision of each release',
  );
});

t.test('a release is its newest revision; uninstalled ones are left out', async (t) => {
  const newest = newestRevisions([
    record('web', 'shop', 1, 'superseded'),
    record('web', 'shop', 3, 'deployed'),
    record('web', 'shop', 2, 'superseded'),
    record('web', 'other', 1, 'failed'),
    record('gone', 'shop', 2, 'uninstalled'),
  ] as never);
  t.same(
    newest.map((r) => [r.namespace, r.name, r.version]),
    [
      ['other', 'web', 1],
      ['shop', 'web', 3],
    ],
  );
});

t.test("Helm's failures become clear HTTP errors", async (t) => {
  t.equal(
    helmMessage('WARNING: kube config is group-readable\nError: INSTALLATION FAILED: boom\n'),
    'INSTALLATION FAILED: boom',
  );
  const cases: Array<[string, number]> = [
    ['INSTALLATION FAILED: cannot reuse a name that is still in use', 409],
    ['UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress', 409],
    ['INSTALLATION FAILED: secrets is forbidden: User "kiteline:bob" cannot create resource', 403],
    ['INSTALLATION FAILED: user bob may not create secrets in namespace x on cluster a', 403],
    ['UPGRADE FAILED: "web" has no deployed releases', 404],
    ['INSTALLATION FAILED: could not locate a version matching provided version string 9.9.9', 404],
    ['INSTALLATION FAILED: failed to authorize: failed to fetch oauth token: unexpected status: 401 Unauthorized', 502],
    ['INSTALLATION FAILED: Kubernetes cluster unreachable: Get "https://127.0.0.1:1/version": refused', 502],
    ['release: not found', 404],
    ['INSTALLATION FAILED: YAML parse error on hello/templates/x.yaml', 400],
    ['INSTALLATION FAILED: failed pre-install: resource Job/ns/h not ready. status: Failed', 422],
    ['INSTALLATION FAILED: context deadline exceeded', 504],
  ];
  for (const [message, status] of cases) t.equal(helmFailure(message).status, status, message);
  t.equal(helmFailure('anything', true).status, 504, 'a run killed at its deadline');
});
