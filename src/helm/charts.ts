// The charts a repository offers (docs/helm.md), for Kite's chart pages and for installs:
// - a classic repository: its index.yaml (read with the repository's credentials, at most
//   MAX_INDEX_BYTES, kept a minute per repository), whose entries name each chart's versions and
//   archive URLs; an install downloads the archive here (credentials only to the repository's own
//   origin, as Helm does) and hands Helm the file;
// - an OCI registry path: the charts the ChartRepository lists, their versions the registry's tags
//   (registries/image-tags.ts: the distribution API with its token flow; the repository's host is
//   the one address outside the public internet it may use); Helm pulls the chart itself, with
//   the credentials in a registry config file of the run's private folder.
// Repositories are an admin's choice, so loopback and private addresses are allowed (an in-cluster
// registry); no connection ever opens to a link-local or cloud metadata address, whether a URL
// names it or a name resolves to it, and a chart archive URL an index names must be http(s).
import { parse as parseYaml } from 'yaml';
import { registryEndpoint } from '../config.js';
import { Agent, fetch as undiciFetch, type Response } from 'undici';
import { guardedLookup, internalAddress, refusedAddress } from '../credentials/refused-addresses.js';
import { BadGatewayError, BadRequestError, GatewayTimeoutError, NotFoundError } from '../errors.js';
import type { ChartRepositorySpec, RepositoryCredentials } from '../host/chart-repositories.js';
import { isOciRepository } from '../host/chart-repositories.js';
import { ImageTagReader } from '../registries/image-tags.js';

/** An index.yaml read at most (public indexes of large repositories are a few tens of MiB). */
export const MAX_INDEX_BYTES = 64 * 1024 * 1024;
/** A chart archive downloaded at most. */
export const MAX_CHART_BYTES = 20 * 1024 * 1024;
/** How long an index is reused. */
const INDEX_TTL_MS = 60_000;

export interface ChartVersion {
  version: string;
  appVersion: string;
  description: string;
  created: string;
  /** Classic repositories: where the archive is (absolute). */
  urls?: string[];
}

export interface ChartSummary {
  repository: string;
  name: string;
  /** The newest version. */
  version: string;
  appVersion: string;
  description: string;
  icon: string;
}

/** A repository as the chart reader needs it: its spec and credentials. */
export interface ChartSource {
  spec: ChartRepositorySpec;
  credentials?: RepositoryCredentials;
}

interface IndexEntry {
  version?: unknown;
  appVersion?: unknown;
  description?: unknown;
  created?: unknown;
  icon?: unknown;
  urls?: unknown;
}

const text = (value: unknown): string => (typeof value === 'string' ? value : '');
const byVersionDescending = new Intl.Collator('en', { numeric: true });
/** A chart version as a tag (Helm writes `+` as `_`); other tags (`latest`, signatures) are not versions. */
const SEMVER_TAG = /^v?\d+\.\d+\.\d+([-_][0-9A-Za-z.+_-]+)?$/;

/** The version an install takes when none is named: the newest that is not a pre-release, as Helm picks. */
export function defaultVersion<V extends { version: string }>(versions: V[]): V | undefined {
  return versions.find((v) => !/^v?\d+\.\d+\.\d+-/.test(v.version)) ?? versions[0];
}

function basicAuth(credentials: RepositoryCredentials): string {
  return `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`;
}

/**
 * Connections that never open to a link-local or metadata address, however a name resolves (the
 * repository's own origin, which an admin chose); and to anything but the public internet (any
 * other origin an index names).
 */
const ownOrigin = new Agent({ connect: { lookup: guardedLookup(undefined, refusedAddress) } });
const elsewhere = new Agent({ connect: { lookup: guardedLookup(undefined, internalAddress) } });
/** Indexes kept at most (the oldest read goes first). */
const MAX_INDEXES = 32;
type ChartIndex = Map<string, ChartVersion[] & { icon?: string }>;

/** GETs a URL whole, within a size and a deadline; credentials only to the repository's own origin. */
async function download(url: URL, source: ChartSource, maxBytes: number, timeoutMs: number): Promise<Buffer> {
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new BadGatewayError(`chart repository ${source.spec.name}: ${url.protocol} URLs are not fetched`);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const sameOrigin = url.origin === new URL(source.spec.url).origin;
  const why = sameOrigin ? refusedAddress(host) : internalAddress(host);
  if (why) throw new BadGatewayError(`chart repository ${source.spec.name}: ${host} is ${why}`);
  const headers: Record<string, string> = {};
  if (source.credentials && sameOrigin) headers.authorization = basicAuth(source.credentials);
  let response: Response;
  try {
    response = await undiciFetch(url, {
      headers,
      redirect: 'error',
      signal: AbortSignal.timeout(timeoutMs),
      dispatcher: sameOrigin ? ownOrigin : elsewhere,
    });
  } catch (err) {
    if ((err as Error).name === 'TimeoutError')
      throw new GatewayTimeoutError(`chart repository ${source.spec.name} did not answer within ${timeoutMs} ms`);
    const why = ((err as Error).cause as Error | undefined)?.message ?? (err as Error).message;
    throw new BadGatewayError(`chart repository ${source.spec.name} could not be reached: ${why}`);
  }
  if (response.status === 404)
    throw new NotFoundError(`chart repository ${source.spec.name}: ${url.pathname} not found`);
  if (!response.ok || !response.body)
    throw new BadGatewayError(`chart repository ${source.spec.name} answered ${response.status} for ${url.pathname}`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > maxBytes)
      throw new BadGatewayError(`chart repository ${source.spec.name}: ${url.pathname} is too large`);
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks);
}

/** The repository's base URL with a trailing slash, so relative URLs resolve below it. */
function baseUrl(spec: ChartRepositorySpec): URL {
  return new URL(spec.url.endsWith('/') ? spec.url : `${spec.url}/`);
}

/** The OCI registry and path of a repository: `oci://host:port/path` → {host, path}. */
export function ociLocation(spec: ChartRepositorySpec): { host: string; path: string } {
  const rest = spec.url.slice('oci://'.length).replace(/\/+$/, '');
  const slash = rest.indexOf('/');
  return slash < 0 ? { host: rest, path: '' } : { host: rest.slice(0, slash), path: rest.slice(slash + 1) };
}

/** The `oci://` reference of a chart in an OCI repository. */
export function ociChartRef(spec: ChartRepositorySpec, chart: string): string {
  const { host, path } = ociLocation(spec);
  return `oci://${host}/${path ? `${path}/` : ''}${chart}`;
}

/** A docker config (Helm's registry config) with the repository's credentials for its registry. */
export function registryConfig(spec: ChartRepositorySpec, credentials: RepositoryCredentials): string {
  const auth = Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64');
  return JSON.stringify({ auths: { [ociLocation(spec).host]: { auth } } });
}

/** Reads repositories' charts; one per gateway (it keeps the indexes it read for a minute). */
export class ChartReader {
  private readonly indexes = new Map<string, { at: number; entries: Promise<ChartIndex> }>();

  constructor(private readonly timeoutMs: number) {}

  /** A classic repository's charts and their versions (newest first), from its index.yaml. */
  private index(source: ChartSource): Promise<ChartIndex> {
    const key = `${source.spec.name}\n${source.spec.url}\n${source.credentials?.username ?? ''}`;
    const cached = this.indexes.get(key);
    if (cached && Date.now() - cached.at < INDEX_TTL_MS) return cached.entries;
    // One read per repository at a time: callers arriving meanwhile share it. A failed read is not kept.
    const entries = this.readIndex(source);
    this.indexes.delete(key);
    this.indexes.set(key, { at: Date.now(), entries });
    for (const [other, { at }] of this.indexes)
      if (this.indexes.size > MAX_INDEXES || Date.now() - at >= INDEX_TTL_MS) this.indexes.delete(other);
    entries.catch(() => {
      if (this.indexes.get(key)?.entries === entries) this.indexes.delete(key);
    });
    return entries;
  }

  private async readIndex(source: ChartSource): Promise<ChartIndex> {
    const url = new URL('index.yaml', baseUrl(source.spec));
    const body = await download(url, source, MAX_INDEX_BYTES, this.timeoutMs);
    let parsed: { entries?: Record<string, IndexEntry[]> };
    try {
      parsed = parseYaml(body.toString('utf8'), { maxAliasCount: 100 }) as typeof parsed;
    } catch {
      throw new BadGatewayError(`chart repository ${source.spec.name}: index.yaml is not YAML`);
    }
    const entries: ChartIndex = new Map();
    for (const [name, versions] of Object.entries(parsed?.entries ?? {})) {
      if (!Array.isArray(versions)) continue;
      const list: ChartVersion[] & { icon?: string } = versions
        .filter((v) => typeof v?.version === 'string')
        .map((v) => ({
          version: text(v.version),
          appVersion: text(v.appVersion),
          description: text(v.description),
          created: text(v.created),
          urls: (Array.isArray(v.urls) ? v.urls : []).flatMap((u) => {
            if (typeof u !== 'string') return [];
            try {
              return [new URL(u, url).toString()];
            } catch {
              return []; // one entry's broken URL never breaks the list
            }
          }),
        }))
        .sort((a, b) => byVersionDescending.compare(b.version, a.version));
      list.icon = text(versions[0]?.icon);
      if (list.length) entries.set(name, list);
    }
    return entries;
  }

  /** An OCI repository's chart versions: the registry's tags (Helm writes `+` as `_` in a tag). */
  private async ociVersions(source: ChartSource, chart: string): Promise<ChartVersion[]> {
    const { spec, credentials } = source;
    const { host } = ociLocation(spec);
    const endpoint = registryEndpoint(`${spec.plainHttp ? 'http' : 'https'}://${host}`);
    if (!endpoint) throw new BadRequestError(`chart repository ${spec.name}: ${host} is not a registry`);
    const dockerConfig = credentials ? registryConfig(spec, credentials) : undefined;
    const reader = new ImageTagReader(
      { internal: [endpoint], credentialsSecret: '', ca: undefined, timeoutMs: this.timeoutMs },
      () => dockerConfig,
    );
    const tags = await reader.tags(ociChartRef(spec, chart).slice('oci://'.length));
    return tags
      .filter((tag) => SEMVER_TAG.test(tag.name))
      .map((tag) => ({
        version: tag.name.replace(/_/g, '+'),
        appVersion: '',
        description: '',
        created: tag.timestamp ?? '',
      }))
      .sort((a, b) => byVersionDescending.compare(b.version, a.version));
  }

  /** The charts of these repositories (newest version of each), those whose name holds `query` when given. */
  async charts(sources: ChartSource[], query?: string): Promise<ChartSummary[]> {
    const needle = query?.toLowerCase();
    const out: ChartSummary[] = [];
    for (const source of sources) {
      const { spec } = source;
      if (isOciRepository(spec)) {
        for (const name of spec.charts ?? []) {
          if (needle && !name.includes(needle)) continue;
          out.push({ repository: spec.name, name, version: '', appVersion: '', description: '', icon: '' });
        }
        continue;
      }
      for (const [name, versions] of await this.index(source)) {
        if (needle && !name.toLowerCase().includes(needle)) continue;
        const newest = defaultVersion(versions)!;
        out.push({
          repository: spec.name,
          name,
          version: newest.version,
          appVersion: newest.appVersion,
          description: newest.description,
          icon: versions.icon ?? '',
        });
      }
    }
    return out.sort((a, b) => a.name.localeCompare(b.name) || a.repository.localeCompare(b.repository));
  }

  /** A chart's versions, newest first; 404 when the repository has no such chart. */
  async versions(source: ChartSource, chart: string): Promise<ChartVersion[]> {
    if (isOciRepository(source.spec)) {
      if (!(source.spec.charts ?? []).includes(chart))
        throw new NotFoundError(`chart ${chart} is not listed in chart repository ${source.spec.name}`);
      return this.ociVersions(source, chart);
    }
    const versions = (await this.index(source)).get(chart);
    if (!versions) throw new NotFoundError(`chart ${chart} not found in chart repository ${source.spec.name}`);
    return versions;
  }

  /** A classic repository's chart archive of this version (the newest when none): its bytes and version. */
  async archive(source: ChartSource, chart: string, version?: string): Promise<{ bytes: Buffer; version: string }> {
    const versions = await this.versions(source, chart);
    const found = version ? versions.find((v) => v.version === version) : defaultVersion(versions);
    if (!found) throw new NotFoundError(`chart ${chart} has no version ${version} in ${source.spec.name}`);
    const url = found.urls?.[0];
    if (!url)
      throw new BadGatewayError(`chart repository ${source.spec.name} names no archive for ${chart} ${found.version}`);
    return { bytes: await download(new URL(url), source, MAX_CHART_BYTES, this.timeoutMs), version: found.version };
  }
}
