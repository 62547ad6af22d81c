// GET /api/v1/init_check (public): how far first-run setup got, as Kite counts it: 0 while no user
// exists (whatever clusters there are: Kite's UI then offers to create the super user), 1 with a
// user, 2 with a user and a cluster; initialized is step == 2.
import { Type, type Static } from 'typebox';
import type { Services } from '../services.js';
import { objectOf, PUBLIC, schemaOf, type App } from '../schemas.js';

const initState = objectOf({
  initialized: Type.Boolean({ description: 'step == 2' }),
  step: Type.Integer({ description: '0: no user yet; 1: a user, no cluster; 2: both' }),
});

/** The set-up state (also part of GET /api/v1/bootstrap). */
export function setupState({
  users,
  clusterStore,
}: Pick<Services, 'users' | 'clusterStore'>): Static<typeof initState> {
  const step = users.any() ? 1 + (clusterStore.any() ? 1 : 0) : 0;
  return { initialized: step === 2, step };
}

export default async function initRoutes(app: App) {
  app.get(
    '/api/v1/init_check',
    { schema: schemaOf('setup')('How far first-run setup got', { security: PUBLIC, response: { 200: initState } }) },
    async () => setupState(app.services),
  );
}
