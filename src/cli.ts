// The `kiteline` command: serve | controlplane start|stop.
import { loadConfig, parseFlags } from './config.js';
import { startControlPlane, stopControlPlane } from './controlplane/controlplane.js';
import { ConfigError } from './errors.js';
import { nextStepHint, startServer } from './server.js';

const USAGE = `usage:
  kiteline serve [--kubeconfig FILE] [--port N] [--host ADDR] [--namespace NS] [--log-level LEVEL]
  kiteline controlplane start --dir DIR [--name NAME] [--node]
  kiteline controlplane stop --dir DIR`;

/**
 * How long a stopping replica keeps serving, with every answer closing its connection, before it
 * closes: the time the endpoints controller and kube-proxy take to stop sending it new
 * connections (about a second; docs/reliability.md has the measurements). The Deployment's
 * terminationGracePeriodSeconds leaves room for this plus the requests in flight.
 */
const SHUTDOWN_DRAIN_DELAY_MS = 5000;

async function serve(argv: string[]): Promise<void> {
  const config = loadConfig(argv);
  const server = await startServer(config);
  if (server.services.host.users.list().length === 0) process.stderr.write(nextStepHint(server.url) + '\n');
  const shutdown = (signal: string) => {
    server.services.log.info({ signal, drainDelayMs: SHUTDOWN_DRAIN_DELAY_MS }, 'shutting down: draining connections');
    server.drainAndClose(SHUTDOWN_DRAIN_DELAY_MS).then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}

async function controlplane(argv: string[]): Promise<void> {
  const [action, ...rest] = argv;
  const flags = parseFlags(rest);
  if (!flags.dir) throw new ConfigError(`--dir is required\n${USAGE}`);
  if (action === 'start') {
    if (flags.node !== undefined && flags.node !== 'true' && flags.node !== 'false') throw new ConfigError(`--node takes no value\n${USAGE}`);
    const node = flags.node === 'true';
    const cp = await startControlPlane({ dir: flags.dir, node, ...(flags.name ? { name: flags.name } : {}) });
    process.stdout.write(`control plane "${cp.name}" ready at ${cp.server}\n`);
    if (cp.node) process.stdout.write(`node "${cp.node.name}" Ready\n`);
    process.stdout.write(`kubeconfig: ${cp.kubeconfigPath}\n`);
  } else if (action === 'stop') {
    await stopControlPlane(flags.dir);
    process.stdout.write(`control plane in ${flags.dir} stopped\n`);
  } else {
    throw new ConfigError(USAGE);
  }
}

export async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  try {
    if (command === 'serve') await serve(rest);
    else if (command === 'controlplane') await controlplane(rest);
    else if (command === 'help' || command === '--help' || command === undefined) process.stdout.write(USAGE + '\n');
    else throw new ConfigError(`unknown command: ${command}\n${USAGE}`);
  } catch (err) {
    process.stderr.write(`kiteline: ${(err as Error).message}\n`);
    process.exit(err instanceof ConfigError ? 2 : 1);
  }
}
