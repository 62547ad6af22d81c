// Release writes and chart reads through the real `helm` (docs/helm.md). The route hands over a
// kubeconfig that reaches one cluster through kiteline's own Kubernetes API with a token of the
// user's, so every call Helm makes is the user's: kiteline's roles and host guard, the target's
// RBAC through impersonation, and the audit of each call. This module picks the chart (a classic
// repository's archive, downloaded here; an OCI reference Helm pulls with the repository's
// credentials), writes the run's files into its private folder and builds Helm's arguments.
import type { ChartRepositoryResource, RepositoryCredentials } from '../host/chart-repositories.js';
import { isOciRepository } from '../host/chart-repositories.js';
import { ChartReader, ociChartRef, registryConfig, type ChartSource } from './charts.js';
import { HelmWorkspace, runHelm } from './helm-cli.js';

export interface HelmSettings {
  /** The helm binary (a path, or a name on PATH). */
  binary: string;
  /** The longest a release write may wait (Helm's --timeout), seconds. */
  maxTimeoutSeconds: number;
  /** Chart repositories' answers (index, archive, tags) get this long. */
  repositoryTimeoutMs: number;
}

/** A chart in a repository, at a version (the newest when none). */
export interface ChartChoice {
  repository: ChartRepositoryResource;
  credentials?: RepositoryCredentials;
  chart: string;
  version?: string;
}

export interface ReleaseWrite {
  namespace: string;
  name: string;
  /** kiteline's Kubernetes API for the cluster, with the user's token. */
  kubeconfig: string;
  /** Helm's --timeout, seconds. */
  timeoutSeconds: number;
  /** Wait until the release's resources are ready (Helm's --wait=watcher); else only hooks are waited for. */
  wait: boolean;
  signal?: AbortSignal;
}

function sourceOf(choice: ChartChoice): ChartSource {
  return { spec: choice.repository.spec, ...(choice.credentials ? { credentials: choice.credentials } : {}) };
}

export class HelmOperations {
  readonly charts: ChartReader;

  constructor(private readonly settings: HelmSettings) {
    this.charts = new ChartReader(settings.repositoryTimeoutMs);
  }

  /** Runs Helm in a fresh private folder (the kubeconfig written there when given), removed after. */
  private async run(
    timeoutSeconds: number,
    build: (workspace: HelmWorkspace) => Promise<string[]>,
    options: { kubeconfig?: string; signal?: AbortSignal } = {},
  ): Promise<string> {
    const workspace = new HelmWorkspace();
    try {
      if (options.kubeconfig) workspace.file('kubeconfig', options.kubeconfig);
      const args = await build(workspace);
      return await runHelm(args, {
        binary: this.settings.binary,
        workspace,
        // Helm's own --timeout bounds each wait; the process gets a margin beyond it.
        timeoutMs: (timeoutSeconds + 30) * 1000,
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } finally {
      workspace.remove();
    }
  }

  /** Helm's arguments naming the chart: a downloaded archive, or an OCI reference with its flags. */
  private async chartArgs(workspace: HelmWorkspace, choice: ChartChoice): Promise<string[]> {
    const { spec } = choice.repository;
    if (!isOciRepository(spec)) {
      const { bytes } = await this.charts.archive(sourceOf(choice), choice.chart, choice.version);
      return [workspace.file('chart.tgz', bytes)];
    }
    const args = [ociChartRef(spec, choice.chart)];
    if (choice.version) args.push('--version', choice.version);
    if (spec.plainHttp) args.push('--plain-http');
    if (choice.credentials)
      args.push('--registry-config', workspace.file('registry.json', registryConfig(spec, choice.credentials)));
    return args;
  }

  private timeout(seconds: number): number {
    return Math.min(Math.max(1, seconds), this.settings.maxTimeoutSeconds);
  }

  private commonArgs(write: ReleaseWrite): string[] {
    return [
      '--namespace',
      write.namespace,
      '--timeout',
      `${this.timeout(write.timeoutSeconds)}s`,
      `--wait=${write.wait ? 'watcher' : 'hookOnly'}`,
    ];
  }

  /** `helm install`: a new release of the chart with these values (YAML text). */
  async install(write: ReleaseWrite, choice: ChartChoice, values: string | undefined): Promise<void> {
    await this.run(
      this.timeout(write.timeoutSeconds),
      async (workspace) => [
        'install',
        write.name,
        ...(await this.chartArgs(workspace, choice)),
        ...this.commonArgs(write),
        ...(values ? ['--values', workspace.file('values.yaml', values)] : []),
      ],
      write,
    );
  }

  /** `helm upgrade`: the release to the chart and values given (`reuseValues`: on top of its current values). */
  async upgrade(
    write: ReleaseWrite,
    choice: ChartChoice,
    values: string | undefined,
    reuseValues: boolean,
  ): Promise<void> {
    await this.run(
      this.timeout(write.timeoutSeconds),
      async (workspace) => [
        'upgrade',
        write.name,
        ...(await this.chartArgs(workspace, choice)),
        ...this.commonArgs(write),
        ...(reuseValues ? ['--reuse-values'] : []),
        ...(values ? ['--values', workspace.file('values.yaml', values)] : []),
      ],
      write,
    );
  }

  /** `helm rollback`: to this revision, or the previous one. */
  async rollback(write: ReleaseWrite, revision: number | undefined): Promise<void> {
    await this.run(
      this.timeout(write.timeoutSeconds),
      async () => ['rollback', write.name, ...(revision ? [String(revision)] : []), ...this.commonArgs(write)],
      write,
    );
  }

  /** `helm uninstall` (`keepHistory`: its revisions stay, marked uninstalled). */
  async uninstall(write: ReleaseWrite, keepHistory: boolean): Promise<void> {
    await this.run(
      this.timeout(write.timeoutSeconds),
      async () => ['uninstall', write.name, ...this.commonArgs(write), ...(keepHistory ? ['--keep-history'] : [])],
      write,
    );
  }

  /** `helm show values`: the chart's default values, YAML text. */
  async showValues(choice: ChartChoice, signal?: AbortSignal): Promise<string> {
    const seconds = Math.ceil(this.settings.repositoryTimeoutMs / 1000);
    return this.run(seconds, async (workspace) => ['show', 'values', ...(await this.chartArgs(workspace, choice))], {
      ...(signal ? { signal } : {}),
    });
  }
}
