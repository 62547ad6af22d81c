// kubectl describe for Services (with their EndpointSlices) and Ingresses (each backend with the
// endpoints of its Service). An Ingress of an older API version (extensions or networking.k8s.io
// v1beta1) is described as kubectl describes it, in its networking.k8s.io/v1 form.
import { describeEvents } from './events.js';
import {
  arr,
  byteOrder,
  formatLabels,
  goValue,
  obj,
  printAnnotationsMultiline,
  printLabelsMultiline,
  str,
  strings,
  type Json,
} from './format.js';
import type { RelatedReader } from './related.js';
import { tabbed } from './text.js';

const isSet = (value: unknown) => value !== undefined && value !== null;

/** net.JoinHostPort. */
function joinHostPort(host: string, port: string): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** The label that ties an EndpointSlice to its Service. */
const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';

/** The EndpointSlices of a Service (list them with this label selector). */
export function serviceSliceSelector(serviceName: string): string {
  return `${SERVICE_NAME_LABEL}=${serviceName}`;
}

/**
 * kubectl's formatEndpointSlices: the ready endpoints' first addresses with the port of each slice
 * port named in `ports` (undefined: all), at most three, "+ N more..." after; "<none>" without slices.
 */
export function formatEndpointSlices(slices: Json[], ports: Set<string> | undefined): string {
  if (slices.length === 0) return '<none>';
  const list: string[] = [];
  const max = 3;
  let more = false;
  let count = 0;
  const isReady = (endpoint: Json) => endpoint.conditions?.ready !== false;
  const add = (endpoint: Json, address: (ip: string) => string) => {
    if (list.length === max) more = true;
    if (!isReady(endpoint)) return;
    if (!more) list.push(address(str(arr(endpoint.addresses)[0])));
    count++;
  };
  for (const slice of slices) {
    const endpoints = arr(slice.endpoints);
    if (arr(slice.ports).length === 0) {
      // A headless Service may have no ports.
      for (const endpoint of endpoints) add(endpoint, (ip) => ip);
      continue;
    }
    for (const port of arr(slice.ports)) {
      if (ports && !ports.has(str(port.name))) continue;
      for (const endpoint of endpoints) add(endpoint, (ip) => joinHostPort(ip, goValue(port.port ?? 0)));
    }
  }
  const text = list.join(',');
  return more ? `${text} + ${count - max} more...` : text;
}

/** The load balancer's addresses, each IP with its mode (kubectl's buildIngressString). */
function loadBalancerIngress(ingress: Json[]): string {
  return ingress
    .map((i) => {
      if (!str(i.ip)) return str(i.hostname);
      return i.ipMode ? `${str(i.ip)} (${str(i.ipMode)})` : str(i.ip);
    })
    .join(', ');
}

/** `slices` are the Service's EndpointSlices (none when they could not be listed, as kubectl). */
export function describeService(service: Json, slices: Json[], events: Json[]): string {
  return tabbed((w) => {
    const meta = obj(service.metadata);
    const spec = obj(service.spec);
    w.write(0, `Name:\t${str(meta.name)}\n`);
    w.write(0, `Namespace:\t${str(meta.namespace)}\n`);
    printLabelsMultiline(w, 'Labels', meta.labels);
    printAnnotationsMultiline(w, 'Annotations', meta.annotations);
    w.write(0, `Selector:\t${formatLabels(spec.selector)}\n`);
    w.write(0, `Type:\t${str(spec.type)}\n`);
    if (spec.ipFamilyPolicy !== undefined && spec.ipFamilyPolicy !== null)
      w.write(0, `IP Family Policy:\t${str(spec.ipFamilyPolicy)}\n`);
    const families = strings(spec.ipFamilies);
    w.write(0, `IP Families:\t${families.length > 0 ? families.join(',') : '<none>'}\n`);
    w.write(0, `IP:\t${str(spec.clusterIP)}\n`);
    const ips = strings(spec.clusterIPs);
    w.write(0, `IPs:\t${ips.length > 0 ? ips.join(',') : '<none>'}\n`);
    if (strings(spec.externalIPs).length > 0) w.write(0, `External IPs:\t${strings(spec.externalIPs).join(',')}\n`);
    if (str(spec.loadBalancerIP)) w.write(0, `Desired LoadBalancer IP:\t${str(spec.loadBalancerIP)}\n`);
    if (str(spec.externalName)) w.write(0, `External Name:\t${str(spec.externalName)}\n`);
    const ingress = arr(service.status?.loadBalancer?.ingress);
    if (ingress.length > 0) w.write(0, `LoadBalancer Ingress:\t${loadBalancerIngress(ingress)}\n`);
    for (const sp of arr(spec.ports)) {
      const name = str(sp.name) || '<unset>';
      const protocol = str(sp.protocol);
      w.write(0, `Port:\t${name}\t${goValue(sp.port ?? 0)}/${protocol}\n`);
      if (typeof sp.targetPort === 'string') w.write(0, `TargetPort:\t${sp.targetPort}/${protocol}\n`);
      else w.write(0, `TargetPort:\t${goValue(sp.targetPort ?? 0)}/${protocol}\n`);
      if (typeof sp.nodePort === 'number' && sp.nodePort !== 0)
        w.write(0, `NodePort:\t${name}\t${sp.nodePort}/${protocol}\n`);
      w.write(0, `Endpoints:\t${formatEndpointSlices(slices, new Set([str(sp.name)]))}\n`);
    }
    w.write(0, `Session Affinity:\t${str(spec.sessionAffinity)}\n`);
    if (str(spec.externalTrafficPolicy)) w.write(0, `External Traffic Policy:\t${str(spec.externalTrafficPolicy)}\n`);
    if (isSet(spec.internalTrafficPolicy)) w.write(0, `Internal Traffic Policy:\t${str(spec.internalTrafficPolicy)}\n`);
    if (typeof spec.healthCheckNodePort === 'number' && spec.healthCheckNodePort !== 0)
      w.write(0, `HealthCheck NodePort:\t${spec.healthCheckNodePort}\n`);
    if (strings(spec.loadBalancerSourceRanges).length > 0)
      w.write(0, `LoadBalancer Source Ranges:\t${strings(spec.loadBalancerSourceRanges).join(',')}\n`);
    if (isSet(spec.trafficDistribution)) w.write(0, `Traffic Distribution:\t${str(spec.trafficDistribution)}\n`);
    describeEvents(w, events);
  });
}

// ---- Ingress --------------------------------------------------------------------------------

/** loadBalancerStatusStringer(s, wide=true): unique addresses, sorted. */
function loadBalancerAddresses(status: Json): string {
  const set = new Set<string>();
  for (const i of arr(status.ingress)) {
    if (str(i.ip)) set.add(str(i.ip));
    else if (str(i.hostname)) set.add(str(i.hostname));
  }
  return [...set].sort(byteOrder).join(',');
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A v1beta1 backend (serviceName, servicePort) in its v1 form. */
function backendV1(backend: Json): Json {
  if (backend.resource) return { resource: backend.resource };
  const port = backend.servicePort;
  return { service: { name: backend.serviceName, port: typeof port === 'number' ? { number: port } : { name: port } } };
}

/** The Ingress's spec in its networking.k8s.io/v1 form (kubectl reads every Ingress through v1). */
function ingressSpecV1(ing: Json): Json {
  const spec = obj(ing.spec);
  if (!str(ing.apiVersion).endsWith('/v1beta1')) return spec;
  const { backend, ...rest } = spec;
  return {
    ...rest,
    defaultBackend: backend ? backendV1(obj(backend)) : undefined,
    rules: arr(spec.rules).map((rule) =>
      rule.http
        ? { ...rule, http: { paths: arr(rule.http.paths).map((p) => ({ ...p, backend: backendV1(obj(p.backend)) })) } }
        : rule,
    ),
  };
}

/** kubectl's describeBackendV1: "svc:port (endpoints)", the error that stopped it, or the resource it names. */
async function describeBackend(related: RelatedReader, namespace: string, backend: Json): Promise<string> {
  if (backend.service) {
    const svc = obj(backend.service);
    const number = typeof svc.port?.number === 'number' ? svc.port.number : 0;
    const portName = str(svc.port?.name);
    const sb = `${str(svc.name)}:${number !== 0 ? number : portName}`;
    let slices: Json[];
    let service: Json;
    try {
      slices = await related.list('endpointslices', namespace, { labelSelector: serviceSliceSelector(str(svc.name)) });
      service = await related.get('services', namespace, str(svc.name));
    } catch (err) {
      if (related.isAborted()) throw err;
      return `${sb} (<error: ${errorText(err)}>)`;
    }
    let spName = '';
    for (const sp of arr(service.spec?.ports)) {
      if (number !== 0 && number === sp.port) spName = str(sp.name);
      else if (portName !== '' && portName === sp.name) spName = str(sp.name);
    }
    return `${sb} (${formatEndpointSlices(slices, new Set([spName]))})`;
  }
  if (backend.resource) {
    const r = obj(backend.resource);
    const group = r.apiGroup === undefined || r.apiGroup === null ? '<none>' : str(r.apiGroup);
    return `APIGroup: ${group}, Kind: ${str(r.kind)}, Name: ${str(r.name)}`;
  }
  return '';
}

export async function describeIngress(ing: Json, events: Json[], related: RelatedReader): Promise<string> {
  const meta = obj(ing.metadata);
  const spec = ingressSpecV1(ing);
  const namespace = str(meta.namespace);
  const defaultBackend = spec.defaultBackend
    ? await describeBackend(related, namespace, obj(spec.defaultBackend))
    : '<default>';

  const rules: Array<{ host: string; paths: Array<{ path: string; backend: string }> }> = [];
  for (const rule of arr(spec.rules)) {
    if (!rule.http) continue;
    const paths = [];
    for (const p of arr(rule.http.paths))
      paths.push({ path: str(p.path), backend: await describeBackend(related, namespace, obj(p.backend)) });
    rules.push({ host: str(rule.host) || '*', paths });
  }

  return tabbed((w) => {
    w.write(0, `Name:\t${str(meta.name)}\n`);
    printLabelsMultiline(w, 'Labels', meta.labels);
    w.write(0, `Namespace:\t${namespace}\n`);
    w.write(0, `Address:\t${loadBalancerAddresses(obj(ing.status?.loadBalancer))}\n`);
    w.write(0, `Ingress Class:\t${isSet(spec.ingressClassName) ? str(spec.ingressClassName) : '<none>'}\n`);
    w.write(0, `Default backend:\t${defaultBackend}\n`);
    const tls = arr(spec.tls);
    if (tls.length > 0) {
      w.write(0, 'TLS:\n');
      for (const t of tls) {
        if (!str(t.secretName)) w.write(1, `SNI routes ${strings(t.hosts).join(',')}\n`);
        else w.write(1, `${str(t.secretName)} terminates ${strings(t.hosts).join(',')}\n`);
      }
    }
    w.write(0, 'Rules:\n  Host\tPath\tBackends\n');
    w.write(1, '----\t----\t--------\n');
    for (const rule of rules) {
      w.write(1, `${rule.host}\t\n`);
      for (const p of rule.paths) w.write(2, `\t${p.path} \t${p.backend}\n`);
    }
    if (rules.length === 0) w.write(1, `*\t*\t${defaultBackend}\n`);
    printAnnotationsMultiline(w, 'Annotations', meta.annotations);
    describeEvents(w, events);
  });
}
