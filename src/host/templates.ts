// Resource templates in the host cluster: Template custom resources (crds/templates.kiteline.io.yaml)
// in the install namespace, named objectNameFor('template', name) so that an atomic create decides
// name uniqueness, each with an integer id label (ids.ts; a kubectl-applied template gets one when
// first listed). Templates are read rarely (the create dialog, the settings page), so reads go to
// the API server (a consistent list), not to a watch cache; writes are last-write-wins, as Kite's.
import type { KubernetesObject, V1ObjectMeta } from '@kubernetes/client-node';
import { ConflictError, NotFoundError } from '../errors.js';
import { creationTime, oldestFirst } from './cache-index.js';
import { CustomResources } from './crud.js';
import { ensureId } from './id-assign.js';
import { IdAllocator } from './ids.js';
import { isAlreadyExists, isNotFound } from './host-errors.js';
import { objectNameFor } from './names.js';
import { ID_LABEL, MANAGED_BY, MANAGED_BY_LABEL, resourceId } from './resources.js';
import type { HostStore } from './store.js';

/** When the template was last written (creation or update), ISO 8601. */
export const UPDATED_AT_ANNOTATION = 'kiteline.io/updated-at';

export interface TemplateSpec {
  name: string;
  description?: string;
  yaml: string;
}

export interface TemplateResource extends KubernetesObject {
  metadata: V1ObjectMeta & { name: string };
  spec: TemplateSpec;
}

/** A template as the API shows it: Kite's members, plus `ID` (Kite's UI reads the id under that name). */
export interface TemplateView {
  id: number;
  ID: number;
  name: string;
  description: string;
  yaml: string;
  createdAt: string;
  updatedAt: string;
}

export function templateView(template: TemplateResource): TemplateView {
  const id = resourceId(template)!;
  const createdAt = creationTime(template);
  return {
    id,
    ID: id,
    name: template.spec.name,
    description: template.spec.description ?? '',
    yaml: template.spec.yaml,
    createdAt,
    updatedAt: template.metadata.annotations?.[UPDATED_AT_ANNOTATION] ?? createdAt,
  };
}

function now(): string {
  return new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export class TemplateStore {
  private readonly crs: CustomResources<TemplateResource>;
  private readonly ids: IdAllocator;

  constructor(host: HostStore) {
    this.crs = new CustomResources<TemplateResource>(host.customObjects, host.namespace, 'templates', 'Template');
    this.ids = new IdAllocator(host.core, host.namespace);
  }

  /** Every template with a name, by id; one without an id gets one now; of two claiming one id, the older wins. */
  async list(): Promise<TemplateResource[]> {
    const all = (await this.crs.list())
      .filter((t) => typeof t.spec?.name === 'string' && typeof t.spec.yaml === 'string')
      .sort(oldestFirst);
    const maxId = Math.max(0, ...all.map((t) => resourceId(t) ?? 0));
    const seen = new Set<number>();
    const out: TemplateResource[] = [];
    for (const template of all) {
      let id = resourceId(template);
      if (id === undefined || seen.has(id)) {
        id = await ensureId(this.crs, this.ids, 'templates', seen.has(id ?? 0) ? withoutId(template) : template, maxId);
        if (id === undefined || seen.has(id)) continue;
        template.metadata.labels = { ...template.metadata.labels, [ID_LABEL]: String(id) };
      }
      seen.add(id);
      out.push(template);
    }
    return out.sort((a, b) => resourceId(a)! - resourceId(b)!);
  }

  async byId(id: number): Promise<TemplateResource> {
    const found = (await this.list()).find((t) => resourceId(t) === id);
    if (!found) throw new NotFoundError('template not found');
    return found;
  }

  /** Creates a template; 409 AlreadyExists when the name is taken (also under races). */
  async create(spec: TemplateSpec): Promise<TemplateResource> {
    const existing = await this.list();
    const id = await this.ids.next('templates', Math.max(0, ...existing.map((t) => resourceId(t)!)));
    try {
      return await this.crs.create({
        metadata: {
          name: objectNameFor('template', spec.name),
          labels: { [ID_LABEL]: String(id), [MANAGED_BY_LABEL]: MANAGED_BY },
          annotations: { [UPDATED_AT_ANNOTATION]: now() },
        },
        spec,
      });
    } catch (err) {
      if (isAlreadyExists(err)) throw new ConflictError(`template already exists: ${spec.name}`, 'AlreadyExists');
      throw err;
    }
  }

  /** Changes the description and YAML (the name stays). */
  async update(
    template: TemplateResource,
    changes: { description?: string; yaml?: string },
  ): Promise<TemplateResource> {
    try {
      return await this.crs.patch(template.metadata.name, {
        metadata: { annotations: { [UPDATED_AT_ANNOTATION]: now() } },
        spec: changes,
      });
    } catch (err) {
      if (isNotFound(err)) throw new NotFoundError('template not found');
      throw err;
    }
  }

  async delete(template: TemplateResource): Promise<void> {
    try {
      await this.crs.delete(template.metadata.name, template.metadata.uid);
    } catch (err) {
      if (isNotFound(err) || err instanceof ConflictError) throw new NotFoundError('template not found');
      throw err;
    }
  }
}

/** The template as if it had no id (it shares one with an older template: it needs a new one). */
function withoutId(template: TemplateResource): TemplateResource {
  const labels = { ...template.metadata.labels };
  delete labels[ID_LABEL];
  return { ...template, metadata: { ...template.metadata, labels } };
}
