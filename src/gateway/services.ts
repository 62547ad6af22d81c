// What the gateway's routes may use: one object built at start-up (server.ts) and handed to
// buildApp. Routes never reach past it into globals.
import type { Config } from '../config.js';
import type { HostStore } from '../host/store.js';
import type { Logger } from '../log.js';

export interface Services {
  config: Config;
  log: Logger;
  host: HostStore;
}
