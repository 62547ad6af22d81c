// Kite's resource tools beside the generic resource routes: events of an object, apply of YAML,
// node actions, workload history and rollback, CRDs, and kiteline's version. Registered before the
// resource routes; every path here has a fixed segment the generic /api/v1/:resource/... routes
// cannot claim (events/resources, resources/apply, nodes/_all/:name/<action>, a fourth segment
// history or rollback, crds, version). docs/tools.md describes them.
import type { App } from '../schemas.js';
import applyRoutes from './apply.js';
import crdRoutes from './crds.js';
import eventRoutes from './events.js';
import historyRoutes from './history.js';
import nodeRoutes from './nodes.js';
import versionRoutes from './version.js';

export default async function toolRoutes(app: App) {
  await app.register(eventRoutes);
  await app.register(applyRoutes);
  await app.register(nodeRoutes);
  await app.register(historyRoutes);
  await app.register(crdRoutes);
  await app.register(versionRoutes);
}
