// GET /api/v1/init_check (public): how far first-run setup got. step counts what exists
// (a user: +1, a cluster: +1); initialized is step == 2.
import { Type } from 'typebox';
import { objectOf, PUBLIC, schemaOf, type App } from '../schemas.js';

const initState = objectOf({
  initialized: Type.Boolean({ description: 'step == 2' }),
  step: Type.Integer({ description: 'a user exists: +1, a cluster exists: +1' }),
});

export default async function initRoutes(app: App) {
  app.get(
    '/api/v1/init_check',
    { schema: schemaOf('setup')('How far first-run setup got', { security: PUBLIC, response: { 200: initState } }) },
    async () => {
      const { users, clusterStore } = app.services;
      const step = (users.any() ? 1 : 0) + (clusterStore.any() ? 1 : 0);
      return { initialized: step === 2, step };
    },
  );
}
