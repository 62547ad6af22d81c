// kubectl describe for Pods, and the pod parts other describers reuse: containers (image, ports,
// command, state, resources, probes, environment, mounts), volumes, scheduling (node selectors,
// tolerations, topology spread constraints), and the "Pod Template" block of Deployments,
// ReplicaSets, StatefulSets, DaemonSets, Jobs and CronJobs.
import { describeEvents, type EventRef } from './events.js';
import { printPersistentVolumeClaim } from './config.js';
import {
  arr,
  controllerOf,
  formatLabelSelector,
  goList,
  goValue,
  obj,
  printAnnotationsMultiline,
  printBool,
  printLabelsMultiline,
  printTolerationsMultiline,
  rfc1123z,
  since,
  str,
  stringOrNone,
  strings,
  byteOrder,
  type Json,
} from './format.js';
import { Quantity } from '../cluster-access/quantity.js';
import { NestedWriter, tabbed, type DescribeWriter } from './text.js';

/** How a pod's events are referenced: no kind, and a mirror pod's UID from its annotation (as kubectl). */
export function podEventRef(pod: Json): EventRef {
  const mirror = obj(pod.metadata?.annotations)['kubernetes.io/config.mirror'];
  return {
    kind: '',
    name: str(pod.metadata?.name),
    namespace: str(pod.metadata?.namespace),
    uid: typeof mirror === 'string' ? mirror : str(pod.metadata?.uid),
  };
}

export function describePod(pod: Json, events: Json[]): string {
  return tabbed((w) => {
    const meta = obj(pod.metadata);
    const spec = obj(pod.spec);
    const status = obj(pod.status);
    w.write(0, `Name:\t${str(meta.name)}\n`);
    w.write(0, `Namespace:\t${str(meta.namespace)}\n`);
    if (typeof spec.priority === 'number') w.write(0, `Priority:\t${spec.priority}\n`);
    if (str(spec.priorityClassName)) w.write(0, `Priority Class Name:\t${str(spec.priorityClassName)}\n`);
    if (str(spec.runtimeClassName)) w.write(0, `Runtime Class Name:\t${str(spec.runtimeClassName)}\n`);
    if (str(spec.serviceAccountName)) w.write(0, `Service Account:\t${str(spec.serviceAccountName)}\n`);
    if (!str(spec.nodeName)) w.write(0, 'Node:\t<none>\n');
    else w.write(0, `Node:\t${str(spec.nodeName)}/${str(status.hostIP)}\n`);
    if (status.startTime) w.write(0, `Start Time:\t${rfc1123z(status.startTime)}\n`);
    printLabelsMultiline(w, 'Labels', meta.labels);
    printAnnotationsMultiline(w, 'Annotations', meta.annotations);
    if (meta.deletionTimestamp && status.phase !== 'Failed' && status.phase !== 'Succeeded') {
      w.write(0, `Status:\tTerminating (lasts ${since(meta.deletionTimestamp)})\n`);
      w.write(0, `Termination Grace Period:\t${goValue(meta.deletionGracePeriodSeconds ?? 0)}s\n`);
    } else {
      w.write(0, `Status:\t${str(status.phase)}\n`);
    }
    if (str(status.reason)) w.write(0, `Reason:\t${str(status.reason)}\n`);
    if (str(status.message)) w.write(0, `Message:\t${str(status.message)}\n`);
    describeSeccompProfile(w, 0, spec.securityContext?.seccompProfile);
    w.write(0, `IP:\t${str(status.podIP)}\n`);
    describePodIPs(w, pod, '');
    const controlledBy = controllerOf(pod);
    if (controlledBy) w.write(0, `Controlled By:\t${controlledBy}\n`);
    if (str(status.nominatedNodeName)) w.write(0, `NominatedNodeName:\t${str(status.nominatedNodeName)}\n`);
    if (spec.resources) {
      w.write(0, 'Resources:\n');
      describeResources(w, obj(spec.resources), 1);
    }

    const resolve = envValueResolver(pod);
    if (arr(spec.initContainers).length > 0)
      describeContainers(
        w,
        'Init Containers',
        arr(spec.initContainers),
        arr(status.initContainerStatuses),
        resolve,
        '',
      );
    describeContainers(w, 'Containers', arr(spec.containers), arr(status.containerStatuses), resolve, '');
    if (arr(spec.ephemeralContainers).length > 0) {
      describeContainers(
        w,
        'Ephemeral Containers',
        arr(spec.ephemeralContainers),
        arr(status.ephemeralContainerStatuses),
        resolve,
        '',
      );
    }
    const conditions = arr(status.conditions);
    if (arr(spec.readinessGates).length > 0) {
      w.write(0, 'Readiness Gates:\n  Type\tStatus\n');
      for (const gate of arr(spec.readinessGates)) {
        const found = conditions.find((c) => c.type === gate.conditionType);
        w.write(1, `${str(gate.conditionType)} \t${found ? str(found.status) : '<none>'} \n`);
      }
    }
    if (conditions.length > 0) {
      w.write(0, 'Conditions:\n  Type\tStatus\n');
      for (const c of conditions) w.write(1, `${str(c.type)} \t${str(c.status)} \n`);
    }
    describeVolumes(w, arr(spec.volumes), '');
    w.write(0, `QoS Class:\t${str(status.qosClass) || computePodQos(pod)}\n`);
    printLabelsMultiline(w, 'Node-Selectors', spec.nodeSelector);
    printTolerationsMultiline(w, 'Tolerations', spec.tolerations);
    describeTopologySpreadConstraints(w, arr(spec.topologySpreadConstraints), '');
    if (spec.workloadRef) describeWorkloadReference(w, obj(spec.workloadRef), '');
    describeEvents(w, events);
  });
}

/** The pod's or a container's seccomp profile (`level` 0: the pod's, 2: a container's). */
function describeSeccompProfile(w: DescribeWriter, level: number, profile: unknown): void {
  if (!profile) return;
  const type = str(obj(profile).type);
  w.write(level, `SeccompProfile:\t${type}\n`);
  if (type === 'Localhost') w.write(level + 1, `LocalhostProfile:\t${str(obj(profile).localhostProfile)}\n`);
}

/** kubectl's describeTopologySpreadConstraints (sorted by topology key). */
function describeTopologySpreadConstraints(w: DescribeWriter, constraints: Json[], space: string): void {
  if (constraints.length === 0) return;
  w.write(0, `${space}Topology Spread Constraints:\t`);
  [...constraints]
    .sort((a, b) => byteOrder(str(a.topologyKey), str(b.topologyKey)))
    .forEach((c, i) => {
      if (i !== 0) w.write(0, `${space}\t`);
      const skew = goValue(c.maxSkew ?? 0);
      let text = `${str(c.topologyKey)}:${str(c.whenUnsatisfiable)} when max skew ${skew} is exceeded`;
      if (c.labelSelector) text += ` for selector ${formatLabelSelector(c.labelSelector)}`;
      w.write(0, `${text}\n`);
    });
}

/** The pod's workload and pod group (spec.workloadRef). */
function describeWorkloadReference(w: DescribeWriter, ref: Json, space: string): void {
  w.write(0, `${space}WorkloadRef:\n`);
  w.write(1, `Name:\t${str(ref.name)}\n`);
  w.write(1, `PodGroup:\t${str(ref.podGroup)}\n`);
  if (str(ref.podGroupReplicaKey)) w.write(1, `PodGroupReplicaKey:\t${str(ref.podGroupReplicaKey)}\n`);
}

function describePodIPs(w: DescribeWriter, pod: Json, space: string): void {
  const ips = arr(pod.status?.podIPs);
  if (ips.length === 0) {
    w.write(0, `${space}IPs:\t<none>\n`);
    return;
  }
  w.write(0, `${space}IPs:\n`);
  for (const ip of ips) w.write(1, `IP:\t${str(ip.ip)}\n`);
}

/** The cpu and memory quantities above zero of a resource list. */
function qosQuantities(list: unknown): Array<[string, Quantity]> {
  const named = ['cpu', 'memory'].map((name) => [name, obj(list)[name]] as const);
  return named
    .filter(([, value]) => value !== undefined)
    .map(([name, value]) => [name, Quantity.parse(value)] as [string, Quantity])
    .filter(([, q]) => q.cmp(Quantity.zero()) > 0);
}

/** kubectl's qos.ComputePodQOS, for a pod whose status does not say (the API server normally fills it in). */
function computePodQos(pod: Json): string {
  const requests = new Map<string, Quantity>();
  const limits = new Map<string, Quantity>();
  const add = (sum: Map<string, Quantity>, list: unknown) => {
    for (const [name, q] of qosQuantities(list)) sum.set(name, sum.get(name)?.add(q) ?? q);
  };
  let guaranteed = true;
  const needsBothLimits = (list: unknown) => {
    if (qosQuantities(list).length < 2) guaranteed = false;
  };
  const podResources = pod.spec?.resources;
  if (podResources) {
    add(requests, podResources.requests);
    if (podResources.limits) {
      add(limits, podResources.limits);
      needsBothLimits(podResources.limits);
    }
  } else {
    for (const c of [...arr(pod.spec?.containers), ...arr(pod.spec?.initContainers)]) {
      add(requests, c.resources?.requests);
      add(limits, c.resources?.limits);
      needsBothLimits(c.resources?.limits);
    }
  }
  if (requests.size === 0 && limits.size === 0) return 'BestEffort';
  if (guaranteed) {
    for (const [name, q] of requests) {
      if (limits.get(name)?.cmp(q) !== 0) guaranteed = false;
    }
  }
  return guaranteed && requests.size === limits.size ? 'Guaranteed' : 'Burstable';
}

// ---- containers -----------------------------------------------------------------------------

type EnvResolver = ((env: Json) => string) | undefined;

export function describeContainers(
  w: DescribeWriter,
  label: string,
  containers: Json[],
  statuses: Json[],
  resolve: EnvResolver,
  space: string,
): void {
  const byName = new Map(statuses.map((s) => [str(s.name), s]));
  w.write(0, `${space}${label}:${containers.length === 0 ? ' <none>' : ''}\n`);
  for (const container of containers) {
    const status = byName.get(str(container.name));
    describeContainerBasicInfo(w, container, status, space);
    describeContainerCommand(w, container);
    if (status) describeContainerState(w, status);
    describeResources(w, obj(container.resources), 2);
    describeContainerProbe(w, container);
    if (arr(container.envFrom).length > 0) describeContainerEnvFrom(w, container);
    describeContainerEnvVars(w, container, resolve);
    describeContainerVolumes(w, container);
  }
}

/** "8080/TCP (http), 8443/TCP (https)": the container's or the host's port of each port, with its name. */
function portsString(ports: Json[], field: 'containerPort' | 'hostPort'): string {
  return ports
    .map((p) => {
      const port = `${goValue(p[field] ?? 0)}/${str(p.protocol)}`;
      return str(p.name) ? `${port} (${str(p.name)})` : port;
    })
    .join(', ');
}

function describeContainerBasicInfo(w: DescribeWriter, container: Json, status: Json | undefined, space: string): void {
  w.write(1, `${space ? ' ' : ''}${str(container.name)}:\n`);
  if (status) w.write(2, `Container ID:\t${str(status.containerID)}\n`);
  w.write(2, `Image:\t${str(container.image)}\n`);
  if (status) w.write(2, `Image ID:\t${str(status.imageID)}\n`);
  const ports = arr(container.ports);
  const portString = portsString(ports, 'containerPort');
  if (portString.includes(',')) w.write(2, `Ports:\t${portString}\n`);
  else w.write(2, `Port:\t${stringOrNone(portString)}\n`);
  const hostPortString = portsString(ports, 'hostPort');
  if (hostPortString.includes(',')) w.write(2, `Host Ports:\t${hostPortString}\n`);
  else w.write(2, `Host Port:\t${stringOrNone(hostPortString)}\n`);
  describeSeccompProfile(w, 2, container.securityContext?.seccompProfile);
}

function describeContainerCommand(w: DescribeWriter, container: Json): void {
  for (const [title, list] of [
    ['Command', strings(container.command)],
    ['Args', strings(container.args)],
  ] as const) {
    if (list.length === 0) continue;
    w.write(2, `${title}:\n`);
    for (const item of list) for (const s of item.split('\n')) w.write(3, `${s}\n`);
  }
}

/** kubectl's describeResources: the limits, then the requests, each sorted by name (pod-level too). */
function describeResources(w: DescribeWriter, resources: Json, level: number): void {
  for (const [title, list] of [
    ['Limits', obj(resources.limits)],
    ['Requests', obj(resources.requests)],
  ] as const) {
    const names = Object.keys(list).sort(byteOrder);
    if (names.length > 0) w.write(level, `${title}:\n`);
    for (const name of names) w.write(level + 1, `${name}:\t${Quantity.parse(list[name]).toString()}\n`);
  }
}

function describeContainerState(w: DescribeWriter, status: Json): void {
  describeStatus(w, 'State', obj(status.state));
  if (status.lastState?.terminated) describeStatus(w, 'Last State', obj(status.lastState));
  w.write(2, `Ready:\t${printBool(status.ready)}\n`);
  w.write(2, `Restart Count:\t${goValue(status.restartCount ?? 0)}\n`);
}

function describeStatus(w: DescribeWriter, stateName: string, state: Json): void {
  if (state.running) {
    w.write(2, `${stateName}:\tRunning\n`);
    w.write(3, `Started:\t${rfc1123z(state.running.startedAt)}\n`);
  } else if (state.waiting) {
    w.write(2, `${stateName}:\tWaiting\n`);
    if (str(state.waiting.reason)) w.write(3, `Reason:\t${str(state.waiting.reason)}\n`);
  } else if (state.terminated) {
    const t = obj(state.terminated);
    w.write(2, `${stateName}:\tTerminated\n`);
    if (str(t.reason)) w.write(3, `Reason:\t${str(t.reason)}\n`);
    if (str(t.message)) w.write(3, `Message:\t${str(t.message)}\n`);
    w.write(3, `Exit Code:\t${goValue(t.exitCode ?? 0)}\n`);
    if (typeof t.signal === 'number' && t.signal > 0) w.write(3, `Signal:\t${t.signal}\n`);
    w.write(3, `Started:\t${rfc1123z(t.startedAt)}\n`);
    w.write(3, `Finished:\t${rfc1123z(t.finishedAt)}\n`);
  } else {
    w.write(2, `${stateName}:\tWaiting\n`);
  }
}

/** IntOrString.String(). */
function intOrString(value: unknown): string {
  return typeof value === 'number' ? String(value) : str(value);
}

/** net.JoinHostPort. */
function joinHostPort(host: string, port: string): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** kubectl's DescribeProbe. */
export function describeProbe(probe: Json): string {
  const n = (v: unknown) => goValue(v ?? 0);
  const attrs =
    `delay=${n(probe.initialDelaySeconds)}s timeout=${n(probe.timeoutSeconds)}s period=${n(probe.periodSeconds)}s ` +
    `#success=${n(probe.successThreshold)} #failure=${n(probe.failureThreshold)}`;
  if (probe.exec) return `exec ${goList(probe.exec.command)} ${attrs}`;
  if (probe.httpGet) {
    const h = obj(probe.httpGet);
    const scheme = str(h.scheme).toLowerCase();
    const port = intOrString(h.port);
    const host = port ? joinHostPort(str(h.host), port) : str(h.host);
    let path = str(h.path);
    if (path && host && !path.startsWith('/')) path = `/${path}`;
    const url = `${scheme ? `${scheme}:` : ''}${host || scheme ? `//${host}` : ''}${encodeURI(path)}`;
    return `http-get ${url} ${attrs}`;
  }
  if (probe.tcpSocket) return `tcp-socket ${str(probe.tcpSocket.host)}:${intOrString(probe.tcpSocket.port)} ${attrs}`;
  if (probe.grpc) return `grpc <pod>:${goValue(probe.grpc.port ?? 0)} ${str(probe.grpc.service)} ${attrs}`;
  return `unknown ${attrs}`;
}

function describeContainerProbe(w: DescribeWriter, container: Json): void {
  if (container.livenessProbe) w.write(2, `Liveness:\t${describeProbe(obj(container.livenessProbe))}\n`);
  if (container.readinessProbe) w.write(2, `Readiness:\t${describeProbe(obj(container.readinessProbe))}\n`);
  if (container.startupProbe) w.write(2, `Startup:\t${describeProbe(obj(container.startupProbe))}\n`);
}

function describeContainerVolumes(w: DescribeWriter, container: Json): void {
  const mounts = arr(container.volumeMounts);
  const none = mounts.length === 0 ? '\t<none>' : '';
  w.write(2, `Mounts:${none}\n`);
  for (const m of [...mounts].sort((a, b) => byteOrder(str(a.mountPath), str(b.mountPath)))) {
    const flags = [m.readOnly === true ? 'ro' : 'rw'];
    if (str(m.subPath)) flags.push(`path=${JSON.stringify(str(m.subPath))}`);
    w.write(3, `${str(m.mountPath)} from ${str(m.name)} (${flags.join(',')})\n`);
  }
  const devices = arr(container.volumeDevices);
  if (devices.length > 0) {
    w.write(2, `Devices:${none}\n`);
    for (const d of [...devices].sort((a, b) => byteOrder(str(a.devicePath), str(b.devicePath))))
      w.write(3, `${str(d.devicePath)} from ${str(d.name)}\n`);
  }
}

/** The value of a resourceFieldRef (resourcehelper.ExtractContainerResourceValue), "" when unknown. */
function containerResourceValue(ref: Json, container: Json): string {
  const [kind, name] = str(ref.resource).split('.', 2) as [string, string | undefined];
  const list =
    kind === 'limits'
      ? obj(container.resources?.limits)
      : kind === 'requests'
        ? obj(container.resources?.requests)
        : undefined;
  const known =
    name !== undefined && (['cpu', 'memory', 'ephemeral-storage'].includes(name) || name.startsWith('hugepages-'));
  if (!list || !known) return '';
  const quantity = Quantity.parse(list[name]);
  // An absent or zero divisor means 1 (the API server defaults it to "0").
  const given = Quantity.parse(ref.divisor);
  const divisor = given.isZero() ? Quantity.parse('1') : given;
  if (name === 'cpu') {
    const d = divisor.milliValue() || 1;
    return String(Math.ceil(quantity.milliValue() / d));
  }
  const d = divisor.value() || 1;
  return String(Math.ceil(quantity.value() / d));
}

function describeContainerEnvVars(w: DescribeWriter, container: Json, resolve: EnvResolver): void {
  const env = arr(container.env);
  w.write(2, `Environment:${env.length === 0 ? '\t<none>' : ''}\n`);
  for (const e of env) {
    const name = str(e.name);
    const from = e.valueFrom ? obj(e.valueFrom) : undefined;
    if (!from) {
      str(e.value)
        .split('\n')
        .forEach((s, i) => w.write(3, i === 0 ? `${name}:\t${s}\n` : `\t${s}\n`));
      continue;
    }
    if (from.fieldRef) {
      const value = resolve ? resolve(e) : '';
      w.write(3, `${name}:\t${value} (${str(from.fieldRef.apiVersion)}:${str(from.fieldRef.fieldPath)})\n`);
    } else if (from.resourceFieldRef) {
      let value = containerResourceValue(obj(from.resourceFieldRef), container);
      const resource = str(from.resourceFieldRef.resource);
      if (value === '0' && (resource === 'limits.cpu' || resource === 'limits.memory')) value = 'node allocatable';
      w.write(3, `${name}:\t${value} (${resource})\n`);
    } else if (from.secretKeyRef) {
      const r = obj(from.secretKeyRef);
      w.write(
        3,
        `${name}:\t<set to the key '${str(r.key)}' in secret '${str(r.name)}'>\tOptional: ${r.optional === true}\n`,
      );
    } else if (from.configMapKeyRef) {
      const r = obj(from.configMapKeyRef);
      w.write(
        3,
        `${name}:\t<set to the key '${str(r.key)}' of config map '${str(r.name)}'>\tOptional: ${r.optional === true}\n`,
      );
    }
  }
}

function describeContainerEnvFrom(w: DescribeWriter, container: Json): void {
  w.write(2, 'Environment Variables from:\n');
  for (const e of arr(container.envFrom)) {
    let from = '';
    let name = '';
    let optional = false;
    if (e.configMapRef) {
      from = 'ConfigMap';
      name = str(e.configMapRef.name);
      optional = e.configMapRef.optional === true;
    } else if (e.secretRef) {
      from = 'Secret';
      name = str(e.secretRef.name);
      optional = e.secretRef.optional === true;
    }
    if (!str(e.prefix)) w.write(3, `${name}\t${from}\tOptional: ${optional}\n`);
    else w.write(3, `${name}\t${from} with prefix '${str(e.prefix)}'\tOptional: ${optional}\n`);
  }
}

/**
 * The value of a fieldRef env var in a pod (kubectl's EnvValueRetriever), "" when kubectl does not know
 * it: kubectl's scheme converts only the metadata.name and metadata.namespace field labels, so every
 * other path (metadata.uid, spec.nodeName, status.podIP, labels, ...) prints empty.
 */
function envValueResolver(pod: Json): (env: Json) => string {
  return (env) => {
    const meta = obj(pod.metadata);
    switch (str(env.valueFrom?.fieldRef?.fieldPath)) {
      case 'metadata.name':
        return str(meta.name);
      case 'metadata.namespace':
        return str(meta.namespace);
      default:
        return '';
    }
  };
}

// ---- volumes --------------------------------------------------------------------------------

export function describeVolumes(w: DescribeWriter, volumes: Json[], space: string): void {
  if (volumes.length === 0) {
    w.write(0, `${space}Volumes:\t<none>\n`);
    return;
  }
  w.write(0, `${space}Volumes:\n`);
  for (const volume of volumes) {
    w.write(1, `${space ? ' ' : ''}${str(volume.name)}:\n`);
    describeVolumeSource(w, volume);
  }
}

function describeVolumeSource(w: DescribeWriter, v: Json): void {
  const f = (pairs: Array<[string, unknown]>) =>
    pairs.map(([k, value]) => `    ${k}:\t${typeof value === 'string' ? value : goValue(value)}\n`).join('');
  if (v.hostPath) {
    w.write(
      2,
      `Type:\tHostPath (bare host directory volume)\n${f([
        ['Path', str(v.hostPath.path)],
        ['HostPathType', v.hostPath.type === undefined ? '<none>' : str(v.hostPath.type)],
      ])}`,
    );
  } else if (v.emptyDir) {
    const limit = v.emptyDir.sizeLimit !== undefined ? Quantity.parse(v.emptyDir.sizeLimit) : undefined;
    const sizeLimit = limit && limit.cmp(Quantity.zero()) > 0 ? limit.toString() : '<unset>';
    w.write(
      2,
      `Type:\tEmptyDir (a temporary directory that shares a pod's lifetime)\n${f([
        ['Medium', str(v.emptyDir.medium)],
        ['SizeLimit', sizeLimit],
      ])}`,
    );
  } else if (v.gcePersistentDisk) {
    const g = obj(v.gcePersistentDisk);
    w.write(
      2,
      `Type:\tGCEPersistentDisk (a Persistent Disk resource in Google Compute Engine)\n${f([
        ['PDName', str(g.pdName)],
        ['FSType', str(g.fsType)],
        ['Partition', g.partition ?? 0],
        ['ReadOnly', g.readOnly === true],
      ])}`,
    );
  } else if (v.awsElasticBlockStore) {
    const a = obj(v.awsElasticBlockStore);
    w.write(
      2,
      `Type:\tAWSElasticBlockStore (a Persistent Disk resource in AWS)\n${f([
        ['VolumeID', str(a.volumeID)],
        ['FSType', str(a.fsType)],
        ['Partition', a.partition ?? 0],
        ['ReadOnly', a.readOnly === true],
      ])}`,
    );
  } else if (v.gitRepo) {
    w.write(
      2,
      `Type:\tGitRepo (a volume that is pulled from git when the pod is created)\n${f([
        ['Repository', str(v.gitRepo.repository)],
        ['Revision', str(v.gitRepo.revision)],
      ])}`,
    );
  } else if (v.secret) {
    w.write(
      2,
      `Type:\tSecret (a volume populated by a Secret)\n${f([
        ['SecretName', str(v.secret.secretName)],
        ['Optional', v.secret.optional === true],
      ])}`,
    );
  } else if (v.configMap) {
    w.write(
      2,
      `Type:\tConfigMap (a volume populated by a ConfigMap)\n${f([
        ['Name', str(v.configMap.name)],
        ['Optional', v.configMap.optional === true],
      ])}`,
    );
  } else if (v.nfs) {
    w.write(
      2,
      `Type:\tNFS (an NFS mount that lasts the lifetime of a pod)\n${f([
        ['Server', str(v.nfs.server)],
        ['Path', str(v.nfs.path)],
        ['ReadOnly', v.nfs.readOnly === true],
      ])}`,
    );
  } else if (v.persistentVolumeClaim) {
    const c = obj(v.persistentVolumeClaim);
    w.write(
      2,
      `Type:\tPersistentVolumeClaim (a reference to a PersistentVolumeClaim in the same namespace)\n${f([
        ['ClaimName', str(c.claimName)],
        ['ReadOnly', c.readOnly === true],
      ])}`,
    );
  } else if (v.ephemeral) {
    w.write(
      2,
      'Type:\tEphemeralVolume (an inline specification for a volume that gets created and deleted with the pod)\n',
    );
    const template = v.ephemeral.volumeClaimTemplate;
    if (template)
      printPersistentVolumeClaim(
        new NestedWriter(w, 2),
        { metadata: obj(template.metadata), spec: obj(template.spec) },
        false,
      );
  } else if (v.downwardAPI) {
    w.write(2, 'Type:\tDownwardAPI (a volume populated by information about the pod)\n    Items:\n');
    for (const item of arr(v.downwardAPI.items)) {
      if (item.fieldRef) w.write(3, `${str(item.fieldRef.fieldPath)} -> ${str(item.path)}\n`);
      if (item.resourceFieldRef) w.write(3, `${str(item.resourceFieldRef.resource)} -> ${str(item.path)}\n`);
    }
  } else if (v.projected) {
    w.write(2, 'Type:\tProjected (a volume that contains injected data from multiple sources)\n');
    for (const source of arr(v.projected.sources)) {
      if (source.secret) {
        w.write(2, `SecretName:\t${str(source.secret.name)}\n    Optional:\t${source.secret.optional === true}\n`);
      } else if (source.downwardAPI) {
        w.write(2, 'DownwardAPI:\ttrue\n');
      } else if (source.configMap) {
        w.write(
          2,
          `ConfigMapName:\t${str(source.configMap.name)}\n    Optional:\t${source.configMap.optional === true}\n`,
        );
      } else if (source.serviceAccountToken) {
        w.write(2, `TokenExpirationSeconds:\t${goValue(source.serviceAccountToken.expirationSeconds ?? 0)}\n`);
      }
    }
  } else if (v.csi) {
    const c = obj(v.csi);
    w.write(
      2,
      `Type:\tCSI (a Container Storage Interface (CSI) volume source)\n${f([
        ['Driver', str(c.driver)],
        ['FSType', str(c.fsType)],
        ['ReadOnly', c.readOnly === true],
      ])}`,
    );
    const attributes = obj(c.volumeAttributes);
    const keys = Object.keys(attributes).sort(byteOrder);
    w.write(2, 'VolumeAttributes:\t');
    if (keys.length === 0) w.line('<none>');
    keys.forEach((key, i) => {
      if (i !== 0) {
        w.write(2, '');
        w.write(2, '\t');
      }
      const line = `${key}=${str(attributes[key])}`;
      w.write(2, line.length > 140 ? `${line.slice(0, 140)}...\n` : `${line}\n`);
    });
  } else if (v.image) {
    w.write(
      2,
      `Type:\tImage (a container image or OCI artifact)\n${f([
        ['Reference', str(v.image.reference)],
        ['PullPolicy', str(v.image.pullPolicy)],
      ])}`,
    );
  } else {
    w.write(1, '<unknown>\n');
  }
}

/** kubectl's DescribePodTemplate. */
export function describePodTemplate(w: DescribeWriter, template: Json | undefined): void {
  w.write(0, 'Pod Template:\n');
  if (!template) {
    w.write(1, '<unset>');
    return;
  }
  const meta = obj(template.metadata);
  const spec = obj(template.spec);
  printLabelsMultiline(w, '  Labels', meta.labels);
  if (Object.keys(obj(meta.annotations)).length > 0) printAnnotationsMultiline(w, '  Annotations', meta.annotations);
  if (str(spec.serviceAccountName)) w.write(1, `Service Account:\t${str(spec.serviceAccountName)}\n`);
  if (arr(spec.initContainers).length > 0)
    describeContainers(w, 'Init Containers', arr(spec.initContainers), [], undefined, '  ');
  describeContainers(w, 'Containers', arr(spec.containers), [], undefined, '  ');
  describeVolumes(w, arr(spec.volumes), '  ');
  describeTopologySpreadConstraints(w, arr(spec.topologySpreadConstraints), '  ');
  if (str(spec.priorityClassName)) w.write(1, `Priority Class Name:\t${str(spec.priorityClassName)}\n`);
  printLabelsMultiline(w, '  Node-Selectors', spec.nodeSelector);
  printTolerationsMultiline(w, '  Tolerations', spec.tolerations);
  if (spec.workloadRef) describeWorkloadReference(w, obj(spec.workloadRef), '  ');
}
