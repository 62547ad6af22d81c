// GET /api/v1/init_check (public): how far first-run setup got. step counts what exists
// (a user: +1, a cluster: +1); initialized is step == 2.
import type { FastifyInstance } from 'fastify';

export default async function initRoutes(app: FastifyInstance) {
  app.get('/api/v1/init_check', async () => {
    const { auth, host } = app.services;
    const step = (auth.users.any() ? 1 : 0) + (host.clusters.list().length > 0 ? 1 : 0);
    return { initialized: step === 2, step };
  });
}
