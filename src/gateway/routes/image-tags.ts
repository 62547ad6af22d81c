// GET /api/v1/image/tags?image=<reference>: the tags of an image's repository, read from its
// registry (src/registries/image-tags.ts), for the tag list of Kite's image editor. Answer:
// `[{"name": "<tag>"}]` (Kite's shape; `timestamp` is never set: the distribution API has none).
// Any signed-in principal holding a role may ask, as in Kite, where any signed-in user may; since
// the caller picks the address kiteline then connects to, each principal gets LOOKUPS_PER_MINUTE
// look-ups per minute (per replica), and the reader refuses addresses outside the public internet.
// Failures are errors (Kite answers 200 null): 400 bad reference, 403 refused address, 404 no such
// repository or no access, 429, 502 bad registry answer, 504 no answer in time. docs/tools.md,
// "Image tags".
import { Type } from 'typebox';
import { RateLimiter } from '../../auth/rate-limiter.js';
import { ForbiddenError, TooManyRequestsError } from '../../errors.js';
import { secretValue } from '../../host/owned-secrets.js';
import { ImageTagReader, MAX_TAGS } from '../../registries/image-tags.js';
import { objectOf, schemaOf, type App } from '../schemas.js';

/** Look-ups one principal may start per minute: enough for the UI asking again as the image is typed. */
export const LOOKUPS_PER_MINUTE = 60;
/** The key of a kubernetes.io/dockerconfigjson Secret. */
const DOCKER_CONFIG_KEY = '.dockerconfigjson';

const ImageTagsQuery = Type.Object({
  image: Type.String({
    minLength: 1,
    maxLength: 512,
    description:
      'an image reference (`nginx`, `ghcr.io/org/app`, `registry:5000/team/app:1.0`); tag and digest ignored',
  }),
});

const ImageTags = Type.Array(
  objectOf({
    name: Type.String(),
    timestamp: Type.String({ description: 'RFC 3339; where the registry says (the distribution API does not)' }),
  }),
  { description: `at most ${MAX_TAGS} tags, highest versions first` },
);

export default async function imageTagRoutes(app: App) {
  const { config, host } = app.services;
  const settings = config.imageRegistries;
  const reader = new ImageTagReader(settings, () =>
    secretValue(host.secrets.get(settings.credentialsSecret, host.namespace), DOCKER_CONFIG_KEY),
  );
  const limiter = new RateLimiter(LOOKUPS_PER_MINUTE, 60);

  app.get(
    '/api/v1/image/tags',
    {
      onRequest: app.requireUser,
      schema: schemaOf('images')('The tags of an image’s repository, from its registry', {
        querystring: ImageTagsQuery,
        response: { 200: ImageTags },
      }),
    },
    async (request) => {
      const principal = request.principal!;
      if (principal.roles.length === 0) throw new ForbiddenError('you hold no role: ask an admin for one');
      const key = `${principal.kind}:${principal.id}`;
      const wait = limiter.retryAfter([key]);
      if (wait !== undefined)
        throw new TooManyRequestsError(`too many image tag look-ups; try again in ${wait} seconds`, wait);
      limiter.record([key]);
      return reader.tags(request.query.image);
    },
  );
}
