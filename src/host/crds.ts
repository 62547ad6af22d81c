// Installs or upgrades kiteline's CustomResourceDefinitions from crds/ at start-up, or, when the
// service account may not write CRDs, checks that they are there.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import type { Logger } from '../log.js';
import { apiStatus, describeApiError } from './host-errors.js';

const HASH_ANNOTATION = 'kiteline.io/crd-hash';

/**
 * The CRDs of `dir`, as client-node's typed objects: its serializer writes a create or replace from
 * the typed members only, so members spelled otherwise in YAML (`x-kubernetes-validations`, typed
 * `x_kubernetes_validations`) would be dropped if the parsed YAML were sent as it is.
 */
export function readCrds(dir: string): k8s.V1CustomResourceDefinition[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml') || f.endsWith('.yml'))
    .sort()
    .map((f) => k8s.loadYaml<k8s.V1CustomResourceDefinition>(readFileSync(join(dir, f), 'utf8')));
}

function withHash(crd: k8s.V1CustomResourceDefinition): k8s.V1CustomResourceDefinition {
  const hash = createHash('sha256').update(JSON.stringify(crd.spec)).digest('hex').slice(0, 16);
  return {
    ...crd,
    metadata: { ...crd.metadata, annotations: { ...crd.metadata?.annotations, [HASH_ANNOTATION]: hash } },
  };
}

function established(crd: k8s.V1CustomResourceDefinition): boolean {
  return !!crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
}

/**
 * Creates missing CRDs, replaces changed ones, and waits until all are established. Runs before
 * anything else, with an untranslated client: a 403 here is expected (a pod may not manage CRDs).
 */
export async function ensureCrds(
  kc: k8s.KubeConfig,
  dir: string,
  install: boolean,
  log: Logger,
  timeoutMs = 30_000,
): Promise<void> {
  const api = kc.makeApiClient(k8s.ApiextensionsV1Api);
  const deadline = Date.now() + timeoutMs;
  // The CRDs side by side: a start reads each once, and waits only for what it installed or changed.
  await Promise.all(
    readCrds(dir)
      .map(withHash)
      .map(async (desired) => {
        const name = desired.metadata!.name!;
        let current: k8s.V1CustomResourceDefinition | undefined;
        try {
          current = await api.readCustomResourceDefinition({ name });
        } catch (err) {
          if (apiStatus(err) !== 404 && apiStatus(err) !== 403) throw err;
        }
        const wanted = desired.metadata!.annotations![HASH_ANNOTATION];
        if (!current && !install)
          throw new Error(`CRD ${name} is missing and CRD installation is off (kubectl apply -f crds/)`);
        // Up to date, or not ours to change: only wait until it is established.
        if (current && (!install || current.metadata?.annotations?.[HASH_ANNOTATION] === wanted)) {
          if (!established(current)) await untilEstablished(api, name, deadline);
          return;
        }
        try {
          if (!current) {
            await api.createCustomResourceDefinition({ body: desired });
            log.info({ crd: name }, 'installed CRD');
          } else {
            desired.metadata!.resourceVersion = current.metadata!.resourceVersion!;
            await api.replaceCustomResourceDefinition({ name, body: desired });
            log.info({ crd: name }, 'upgraded CRD');
          }
        } catch (err) {
          if (apiStatus(err) === 409) {
            // another replica got there first
          } else if (apiStatus(err) === 403 && current) {
            log.warn({ crd: name }, 'not allowed to upgrade CRD; using the installed one');
          } else {
            throw new Error(`cannot install CRD ${name}: ${describeApiError(err)}`);
          }
        }
        await untilEstablished(api, name, deadline);
      }),
  );
}

async function untilEstablished(api: k8s.ApiextensionsV1Api, name: string, deadline: number): Promise<void> {
  for (;;) {
    const current = await api.readCustomResourceDefinition({ name });
    if (established(current)) return;
    if (Date.now() > deadline) throw new Error(`CRD ${name} not established in time`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
