// An image's tags from its registry, through the OCI distribution API (GET /v2/<name>/tags/list),
// for Kite's image editor (GET /api/v1/image/tags, docs/tools.md "Image tags"). Anonymous first;
// a 401 with a Bearer challenge gets a token from the challenge's realm (with the registry's
// credentials when the credentials Secret holds some, else anonymously) and the request is sent
// again; a Basic challenge is answered with the credentials. Pages follow the Link header on the
// registry's own origin.
//
// The registry is chosen by whoever names the image, so every connection (registry and token
// server alike) is checked where it opens: never a link-local or metadata address, and never an
// address outside the public internet unless an admin listed that host and port
// (config.imageRegistries.internal); names are checked as they resolve, so a DNS answer cannot
// take kiteline where an address could not. Redirects are not followed. The whole look-up has one
// deadline, each answer is read up to a size, and at most MAX_TAGS tags are kept.
//
// Decision: a small client of our own on undici rather than @snyk/docker-registry-v2-client (the
// maintained one that speaks the token flow): its HTTP library (needle) inflates any
// Content-Encoding the server sends, with no size limit, so a registry could make kiteline inflate
// gigabytes; and it retries with sleeps and writes to the console (README, dependencies).
import { Buffer } from 'node:buffer';
import { rootCertificates } from 'node:tls';
import { buildConnector, Client, errors as undiciErrors, type Dispatcher } from 'undici';
import type { ImageRegistriesConfig, RegistryEndpoint } from '../config.js';
import { registryEndpoint } from '../config.js';
import {
  guardedLookup,
  internalAddress,
  RefusedAddressError,
  refusedAddress,
} from '../credentials/refused-addresses.js';
import { BadGatewayError, ForbiddenError, GatewayTimeoutError, HttpError, NotFoundError } from '../errors.js';
import { parseImageRepository, type ImageRepository } from './image-reference.js';

/** Tags kept at most (the registry's order, then sorted: highest versions first). */
export const MAX_TAGS = 500;
/** Tags asked per page, and pages at most. */
const PAGE_SIZE = 100;
const MAX_PAGES = MAX_TAGS / PAGE_SIZE;
/** Bytes read of all the answers of one look-up together (tags, token). */
export const MAX_ANSWER_BYTES = 4 * 1024 * 1024;
/** A tag as the distribution grammar has it; anything else a registry sends is left out. */
const TAG = /^\w[\w.-]{0,127}$/;
const byVersion = new Intl.Collator('en', { numeric: true });

export interface ImageTag {
  name: string;
  /** When the tag was last pushed, where the registry says (the distribution API does not). */
  timestamp?: string;
}

interface Credentials {
  username: string;
  password: string;
}

/** An answer of the registry or its token server, its body read whole (within the budget). */
interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One header's value (the first when repeated). */
function header(answer: Answer, name: string): string | undefined {
  const value = answer.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * An RFC 9110 challenge: the scheme and its auth-params (quoted strings unescaped), e.g.
 * `Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/nginx:pull"`.
 */
export function parseChallenge(value: string): { scheme: string; params: Record<string, string> } | undefined {
  const match = /^\s*([A-Za-z][\w-]*)(?:\s+([^]*))?$/.exec(value);
  if (!match) return undefined;
  const params: Record<string, string> = {};
  for (const param of (match[2] ?? '').matchAll(/([A-Za-z][\w-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,"]*))/g)) {
    params[param[1].toLowerCase()] = param[2] !== undefined ? param[2].replace(/\\(.)/g, '$1') : (param[3] ?? '');
  }
  return { scheme: match[1].toLowerCase(), params };
}

/**
 * The credentials for a registry in a docker config (`{"auths": {"<registry>": {"auth": base64 of
 * "user:password"} | {"username", "password"}}}`, a kubernetes.io/dockerconfigjson Secret's
 * content). Keys name a registry as `docker login` does; Docker Hub's are any of its names.
 */
export function credentialsFor(dockerConfig: string | undefined, endpoint: RegistryEndpoint): Credentials | undefined {
  if (!dockerConfig) return undefined;
  let auths: unknown;
  try {
    auths = (JSON.parse(dockerConfig) as { auths?: unknown }).auths;
  } catch {
    return undefined;
  }
  if (typeof auths !== 'object' || auths === null) return undefined;
  for (const [key, entry] of Object.entries(auths as Record<string, unknown>)) {
    const named = registryEndpoint(key);
    if (!named || !sameRegistry(named, endpoint) || typeof entry !== 'object' || entry === null) continue;
    const { auth, username, password } = entry as Record<string, unknown>;
    if (typeof username === 'string' && typeof password === 'string' && username !== '') return { username, password };
    if (typeof auth === 'string') {
      const text = Buffer.from(auth, 'base64').toString('utf8');
      const colon = text.indexOf(':');
      if (colon > 0) return { username: text.slice(0, colon), password: text.slice(colon + 1) };
    }
  }
  return undefined;
}

const DOCKER_HUB_NAMES = ['docker.io', 'index.docker.io', 'registry-1.docker.io'];

function sameRegistry(a: RegistryEndpoint, b: RegistryEndpoint): boolean {
  const hub = (e: RegistryEndpoint) => (DOCKER_HUB_NAMES.includes(e.host) ? 'registry-1.docker.io' : e.host);
  return hub(a) === hub(b) && a.port === b.port;
}

/** The next page's URL from a Link header (RFC 8288, rel="next"), on the same origin only. */
function nextPage(link: string | undefined, current: URL): URL | undefined {
  const target = link && /<([^>]*)>\s*;[^,]*\brel="?next"?/.exec(link)?.[1];
  if (!target) return undefined;
  const url = new URL(target, current);
  return url.origin === current.origin ? url : undefined;
}

/** The error a failed connection or request becomes. */
function connectionError(err: unknown, registry: string, timeoutMs: number): HttpError {
  if (err instanceof HttpError) return err;
  for (let cause: unknown = err; cause instanceof Error; cause = cause.cause) {
    if (cause instanceof RefusedAddressError) return new ForbiddenError(`registry ${registry}: ${cause.message}`);
    if (
      cause.name === 'TimeoutError' ||
      cause instanceof undiciErrors.ConnectTimeoutError ||
      cause instanceof undiciErrors.HeadersTimeoutError ||
      cause instanceof undiciErrors.BodyTimeoutError
    )
      return new GatewayTimeoutError(`registry ${registry} did not answer within ${timeoutMs} ms`);
  }
  const code = (err as { code?: unknown }).code;
  const why = typeof code === 'string' ? code : (err as Error).message;
  return new BadGatewayError(`registry ${registry} could not be reached: ${why}`);
}

/** Reads the tags of images' repositories from their registries. */
export class ImageTagReader {
  private readonly ca: string[] | undefined;

  /** `dockerConfig`: the credentials Secret's docker config, read at each look-up (undefined: none). */
  constructor(
    readonly settings: ImageRegistriesConfig,
    private readonly dockerConfig: () => string | undefined = () => undefined,
  ) {
    this.ca = settings.ca ? [...rootCertificates, settings.ca] : undefined;
  }

  /** The tags of the image's repository: 400 bad reference, 403 refused address, 404, 502, 504. */
  async tags(image: string): Promise<ImageTag[]> {
    const ref = parseImageRepository(image);
    const allowed = this.listed(ref.host, ref.port ?? 443) ?? this.listed(ref.host, ref.port ?? 80, true);
    const endpoint: RegistryEndpoint = allowed ?? { host: ref.host, port: ref.port ?? 443, http: false };
    const why = this.refusal(endpoint.host, endpoint.port);
    if (why) throw new ForbiddenError(`registry ${ref.registry} is ${why}: kiteline does not connect there`);
    const lookup = new Lookup(this, ref, endpoint, credentialsFor(this.dockerConfig(), endpoint));
    try {
      return await lookup.run();
    } catch (err) {
      throw connectionError(err, ref.registry, this.settings.timeoutMs);
    } finally {
      lookup.close();
    }
  }

  /** The internal-list entry for this host and port (and scheme, when `http` is given). */
  listed(host: string, port: number, http?: boolean): RegistryEndpoint | undefined {
    const bare = host.replace(/^\[|\]$/g, '').toLowerCase();
    return this.settings.internal.find(
      (e) => e.host === bare && e.port === port && (http === undefined || e.http === http),
    );
  }

  /** Why kiteline does not connect to this host and port, when it is an address it refuses. */
  refusal(host: string, port: number): string | undefined {
    return this.listed(host, port) ? refusedAddress(host) : internalAddress(host);
  }

  /**
   * A connector that checks each connection before it opens: an address by refusal(), a name as
   * it resolves (listed registries may resolve anywhere but to link-local and metadata addresses).
   */
  connector(): buildConnector.connector {
    const { lookup, timeoutMs } = this.settings;
    const options = { timeout: timeoutMs, ...(this.ca ? { ca: this.ca } : {}), minVersion: 'TLSv1.2' as const };
    const strict = buildConnector({ ...options, lookup: guardedLookup(lookup, internalAddress) });
    const lenient = buildConnector({ ...options, lookup: guardedLookup(lookup, refusedAddress) });
    return (opts, callback) => {
      const host = opts.hostname.replace(/^\[|\]$/g, '');
      const port = Number(opts.port) || (opts.protocol === 'http:' ? 80 : 443);
      const why = this.refusal(host, port);
      if (why) return callback(new RefusedAddressError(host, host, why), null);
      (this.listed(host, port) ? lenient : strict)(opts, callback);
    };
  }
}

/** One look-up: its connections, its deadline, its byte budget, its authorization. */
class Lookup {
  private readonly deadline: AbortSignal;
  private readonly clients = new Map<string, Client>();
  private budget = MAX_ANSWER_BYTES;
  private authorization: string | undefined;
  private readonly origin: URL;

  constructor(
    private readonly reader: ImageTagReader,
    private readonly ref: ImageRepository,
    private readonly endpoint: RegistryEndpoint,
    private readonly credentials: Credentials | undefined,
  ) {
    this.deadline = AbortSignal.timeout(reader.settings.timeoutMs);
    const host = endpoint.host.includes(':') ? `[${endpoint.host}]` : endpoint.host;
    this.origin = new URL(`${endpoint.http ? 'http' : 'https'}://${host}:${endpoint.port}`);
  }

  async run(): Promise<ImageTag[]> {
    const names = new Set<string>();
    let url: URL | undefined = new URL(`/v2/${this.ref.repository}/tags/list?n=${PAGE_SIZE}`, this.origin);
    for (let page = 0; url && page < MAX_PAGES && names.size < MAX_TAGS; page++) {
      const answer = await this.registryGet(url);
      let tags: unknown;
      try {
        tags = (JSON.parse(answer.body) as { tags?: unknown }).tags;
      } catch {
        throw new BadGatewayError(`registry ${this.ref.registry} answered with something other than a tag list`);
      }
      if (tags !== null && tags !== undefined && !Array.isArray(tags))
        throw new BadGatewayError(`registry ${this.ref.registry} answered with something other than a tag list`);
      for (const tag of (tags as unknown[] | null) ?? []) {
        // Kite leaves out sha256-… tags too: signatures and attestations (cosign), not images.
        if (typeof tag === 'string' && TAG.test(tag) && !tag.startsWith('sha256')) names.add(tag);
      }
      url = nextPage(header(answer, 'link'), url);
    }
    return [...names]
      .sort((a, b) => byVersion.compare(b, a))
      .slice(0, MAX_TAGS)
      .map((name) => ({ name }));
  }

  close(): void {
    for (const client of this.clients.values()) void client.destroy().catch(() => undefined);
  }

  /** A GET of the registry: on a 401, the challenge answered once; then the answer judged. */
  private async registryGet(url: URL): Promise<Answer> {
    let answer = await this.get(url, this.authorization);
    if (answer.status === 401 && this.authorization === undefined) {
      this.authorization = await this.answerChallenge(header(answer, 'www-authenticate'));
      if (this.authorization !== undefined) answer = await this.get(url, this.authorization);
    }
    const { registry, repository } = this.ref;
    if (answer.status >= 200 && answer.status < 300) return answer;
    if ([401, 403, 404].includes(answer.status))
      throw new NotFoundError(
        `registry ${registry} has no repository ${repository} kiteline may read (it answered ${answer.status}): ` +
          'it does not exist, or it needs credentials kiteline has not got',
      );
    if (answer.status >= 300 && answer.status < 400)
      throw new BadGatewayError(`registry ${registry} answered with a redirect (${answer.status}), not followed`);
    throw new BadGatewayError(`registry ${registry} answered ${answer.status}`);
  }

  /** The Authorization for a challenge: a Bearer token from its realm, or Basic credentials. */
  private async answerChallenge(challengeHeader: string | undefined): Promise<string | undefined> {
    const challenge = challengeHeader ? parseChallenge(challengeHeader) : undefined;
    const basic = this.credentials
      ? `Basic ${Buffer.from(`${this.credentials.username}:${this.credentials.password}`).toString('base64')}`
      : undefined;
    if (challenge?.scheme === 'basic') return basic;
    if (challenge?.scheme !== 'bearer' || !challenge.params.realm) return undefined;
    const realm = this.realm(challenge.params.realm);
    if (challenge.params.service) realm.searchParams.set('service', challenge.params.service);
    realm.searchParams.set('scope', challenge.params.scope || `repository:${this.ref.repository}:pull`);
    const answer = await this.get(realm, basic);
    if (answer.status !== 200)
      throw new BadGatewayError(`the token server of registry ${this.ref.registry} answered ${answer.status}`);
    let token: unknown;
    try {
      const body = JSON.parse(answer.body) as { token?: unknown; access_token?: unknown };
      token = body.token ?? body.access_token;
    } catch {
      token = undefined;
    }
    if (typeof token !== 'string' || !/^[\x21-\x7e]+$/.test(token))
      throw new BadGatewayError(`the token server of registry ${this.ref.registry} sent no token`);
    return `Bearer ${token}`;
  }

  /** The realm's URL: https, or http for a registry spoken to in http itself (a listed one). */
  private realm(text: string): URL {
    let realm: URL | undefined;
    try {
      realm = new URL(text);
    } catch {
      realm = undefined;
    }
    const schemes = this.endpoint.http ? ['http:', 'https:'] : ['https:'];
    if (!realm || !schemes.includes(realm.protocol) || realm.username || realm.password)
      throw new BadGatewayError(
        `registry ${this.ref.registry} named a token server kiteline does not use: ${text.slice(0, 200)}`,
      );
    const port = Number(realm.port) || (realm.protocol === 'http:' ? 80 : 443);
    const why = this.reader.refusal(realm.hostname, port);
    if (why)
      throw new ForbiddenError(
        `the token server of registry ${this.ref.registry} (${realm.host}) is ${why}: kiteline does not connect there`,
      );
    return realm;
  }

  /** One GET, no redirects followed, its body read up to what is left of the budget. */
  private async get(url: URL, authorization: string | undefined): Promise<Answer> {
    let client = this.clients.get(url.origin);
    if (!client) {
      client = new Client(url.origin, {
        connect: this.reader.connector(),
        headersTimeout: this.reader.settings.timeoutMs,
        bodyTimeout: this.reader.settings.timeoutMs,
      });
      this.clients.set(url.origin, client);
    }
    const headers: Record<string, string> = { accept: 'application/json', 'user-agent': 'kiteline' };
    if (authorization) headers.authorization = authorization;
    const response: Dispatcher.ResponseData = await client.request({
      method: 'GET',
      path: `${url.pathname}${url.search}`,
      headers,
      signal: this.deadline,
    });
    const chunks: Buffer[] = [];
    for await (const chunk of response.body as AsyncIterable<Buffer>) {
      this.budget -= chunk.length;
      if (this.budget < 0) {
        response.body.destroy();
        throw new BadGatewayError(
          `registry ${this.ref.registry} answered with more than ${MAX_ANSWER_BYTES} bytes; not read further`,
        );
      }
      chunks.push(chunk);
    }
    return { status: response.statusCode, headers: response.headers, body: Buffer.concat(chunks).toString('utf8') };
  }
}
