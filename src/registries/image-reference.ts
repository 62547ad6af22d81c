// An image reference read the way Docker reads it (the distribution project's reference grammar):
// `[registry/]repository[:tag][@digest]`. The first path component is a registry when it holds a
// "." or a ":", is "localhost", or has upper case letters; otherwise the image is on Docker Hub
// (docker.io, whose API is at registry-1.docker.io), where a one-component name is an official
// image under library/. The tag and the digest are dropped: the tags route asks for the
// repository's tags. Checked component by component without backtracking regular expressions,
// so a long hostile reference costs linear time.
import { isIP } from 'node:net';
import { BadRequestError } from '../errors.js';

export const DOCKER_HUB = 'docker.io';
/** Where Docker Hub's registry API is served. */
const DOCKER_HUB_API = 'registry-1.docker.io';
/** A registry + repository name's longest length (distribution's NameTotalLengthMax). */
const NAME_MAX_LENGTH = 255;

/** A path component: lower-case letters and digits, separated by one of `.`, `_`, `__` or dashes. */
const PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
/** A tag: a word character, then up to 127 word characters, dots and dashes. */
const TAG = /^\w[\w.-]{0,127}$/;
const DOMAIN_LABEL = /^[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?$/;

export interface ImageRepository {
  /** The registry as the image names it, Docker Hub as docker.io (for messages). */
  registry: string;
  /** Host (lower case, IPv6 without brackets) and port of the registry's API. */
  host: string;
  port: number | undefined;
  /** The repository inside the registry, e.g. library/nginx. */
  repository: string;
}

function invalid(image: string, why: string): BadRequestError {
  return new BadRequestError(`image "${image}" is not a valid image reference: ${why}`);
}

/** host[:port] or [IPv6]:port, as a reference's first component; undefined when malformed. */
function registryHost(domain: string): { host: string; port: number | undefined } | undefined {
  const match = /^(\[[^\]]*\]|[^:]*)(?::(\d{1,5}))?$/.exec(domain);
  if (!match) return undefined;
  const [, name = '', portText] = match;
  const port = portText === undefined ? undefined : Number(portText);
  if (port !== undefined && (port < 1 || port > 65535)) return undefined;
  if (name.startsWith('[')) {
    const bare = name.slice(1, -1);
    return isIP(bare) === 6 ? { host: bare.toLowerCase(), port } : undefined;
  }
  if (!name.split('.').every((label) => DOMAIN_LABEL.test(label))) return undefined;
  return { host: name.toLowerCase(), port };
}

/** The registry and repository an image names (400 with the reason when it names none). */
export function parseImageRepository(image: string): ImageRepository {
  if (image === '') throw invalid(image, 'it is empty');
  if (/[\s\x00-\x1f\x7f]/.test(image)) throw invalid(image, 'it contains spaces or control characters');
  let name = image;
  const at = name.indexOf('@');
  if (at >= 0) name = name.slice(0, at); // the digest (or what Kite's UI leaves of it: "@sha256")
  const colon = name.lastIndexOf(':');
  if (colon > name.lastIndexOf('/')) {
    const tag = name.slice(colon + 1);
    if (!TAG.test(tag)) throw invalid(image, `"${tag}" is not a tag`);
    name = name.slice(0, colon);
  }
  const slash = name.indexOf('/');
  const first = slash < 0 ? '' : name.slice(0, slash);
  const isRegistry = first !== '' && (/[.:]/.test(first) || first === 'localhost' || first !== first.toLowerCase());
  let registry = isRegistry ? first : DOCKER_HUB;
  let repository = isRegistry ? name.slice(slash + 1) : name;
  if (registry === 'index.docker.io') registry = DOCKER_HUB;
  if (registry === DOCKER_HUB && !repository.includes('/')) repository = `library/${repository}`;

  if (repository !== repository.toLowerCase()) throw invalid(image, 'the repository name must be lower case');
  if (!repository.split('/').every((component) => PATH_COMPONENT.test(component)))
    throw invalid(image, `"${repository}" is not a repository name`);
  if (registry.length + 1 + repository.length > NAME_MAX_LENGTH)
    throw invalid(image, `the name is longer than ${NAME_MAX_LENGTH} characters`);
  if (registry === DOCKER_HUB) return { registry, host: DOCKER_HUB_API, port: undefined, repository };
  const endpoint = registryHost(registry);
  if (!endpoint) throw invalid(image, `"${registry}" is not a registry host`);
  return { registry, ...endpoint, repository };
}
