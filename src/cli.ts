// The `kiteline` command: serve | controlplane start|stop | terminal.
import { parseArgs } from 'node:util';
import { loadConfig, parseFlags } from './config.js';
import { ConfigError } from './errors.js';

// Each command imports what it runs when it runs: the gateway's modules (Fastify, the Kubernetes
// client) take seconds of CPU to load, which `kiteline terminal` and a usage error do not need.

const USAGE = `usage:
  kiteline serve [--kubeconfig FILE] [--port N] [--host ADDR] [--namespace NS] [--log-level LEVEL]
  kiteline controlplane start --dir DIR [--name NAME] [--node] [--kubernetes-version vX.Y.Z]
  kiteline controlplane stop --dir DIR
  kiteline terminal --server URL [--key API_KEY] [--cluster NAME] [--container NAME] [--shell NAME] NAMESPACE/POD
    (the key may come from KITELINE_API_KEY instead, which keeps it out of ps)`;

/**
 * How long a stopping replica keeps serving, with every answer closing its connection, before it
 * closes: the time the endpoints controller and kube-proxy take to stop sending it new
 * connections (about a second; docs/reliability.md has the measurements). The Deployment's
 * terminationGracePeriodSeconds leaves room for this plus the requests in flight.
 */
const SHUTDOWN_DRAIN_DELAY_MS = 5000;

async function serve(argv: string[]): Promise<void> {
  const config = loadConfig(argv);
  const { nextStepHint, startServer } = await import('./server.js');
  const server = await startServer(config);
  // A route schema that does not compile stops the process, as it stopped Fastify's start before.
  server.schemasCompiled.catch(() => process.exit(1));
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
  const { startControlPlane, stopControlPlane } = await import('./controlplane/controlplane.js');
  if (action === 'start') {
    if (flags.node !== undefined && flags.node !== 'true' && flags.node !== 'false')
      throw new ConfigError(`--node takes no value\n${USAGE}`);
    const node = flags.node === 'true';
    const version = flags['kubernetes-version'];
    if (version !== undefined && !/^v1\.\d+\.\d+$/.test(version))
      throw new ConfigError(`--kubernetes-version takes a release such as v1.35.4\n${USAGE}`);
    const cp = await startControlPlane({
      dir: flags.dir,
      node,
      ...(flags.name ? { name: flags.name } : {}),
      ...(version ? { version } : {}),
    });
    process.stdout.write(`control plane "${cp.name}" (Kubernetes ${cp.version}) ready at ${cp.server}\n`);
    if (cp.node) process.stdout.write(`node "${cp.node.name}" Ready\n`);
    process.stdout.write(`kubeconfig: ${cp.kubeconfigPath}\n`);
  } else if (action === 'stop') {
    await stopControlPlane(flags.dir);
    process.stdout.write(`control plane in ${flags.dir} stopped\n`);
  } else {
    throw new ConfigError(USAGE);
  }
}

async function terminal(argv: string[]): Promise<void> {
  let parsed;
  try {
    const text = { type: 'string' } as const;
    parsed = parseArgs({
      args: argv,
      options: { server: text, key: text, cluster: text, container: text, shell: text },
      allowPositionals: true,
    });
  } catch (err) {
    throw new ConfigError(`${(err as Error).message}\n${USAGE}`);
  }
  const { values, positionals } = parsed;
  const [namespace, pod, ...extra] = positionals.length === 1 ? positionals[0].split('/') : [];
  if (!namespace || !pod || extra.length > 0) throw new ConfigError(`terminal takes one NAMESPACE/POD\n${USAGE}`);
  if (!values.server) throw new ConfigError(`--server is required\n${USAGE}`);
  const key = values.key || process.env.KITELINE_API_KEY;
  if (!key) throw new ConfigError(`an API key is required: --key or KITELINE_API_KEY\n${USAGE}`);
  const { runTerminal } = await import('./terminal-client.js');
  const code = await runTerminal(
    {
      server: values.server,
      key,
      cluster: values.cluster,
      container: values.container,
      shell: values.shell,
      namespace,
      pod,
    },
    { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr },
  );
  // Exit once what was written has gone out.
  process.stdout.write('', () => process.exit(code));
}

export async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  try {
    if (command === 'serve') await serve(rest);
    else if (command === 'controlplane') await controlplane(rest);
    else if (command === 'terminal') await terminal(rest);
    else if (command === 'help' || command === '--help' || command === undefined) process.stdout.write(USAGE + '\n');
    else throw new ConfigError(`unknown command: ${command}\n${USAGE}`);
  } catch (err) {
    process.stderr.write(`kiteline: ${(err as Error).message}\n`);
    process.exit(err instanceof ConfigError ? 2 : 1);
  }
}
