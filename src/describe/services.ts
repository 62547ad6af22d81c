// kubectl describe for Services (with their endpoints) and Ingresses (each backend with the
// endpoints of its Service; an Ingress without a default backend shows kube-system's
// default-http-backend, as kubectl does).
import { describeEvents } from './events.js';
import {
  arr,
  formatLabels,
  obj,
  printAnnotationsMultiline,
  printLabelsMultiline,
  str,
  strings,
  byteOrder,
  goValue,
  type Json,
} from './format.js';
import type { RelatedReader } from './related.js';
import { tabbed } from './text.js';

/** net.JoinHostPort. */
function joinHostPort(host: string, port: string): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** kubectl's formatEndpoints: at most three addresses, "+ N more..." after; `ports` undefined: all. */
export function formatEndpoints(endpoints: Json, ports: Set<string> | undefined): string {
  const subsets = arr(endpoints.subsets);
  if (subsets.length === 0) return '<none>';
  const list: string[] = [];
  const max = 3;
  let more = false;
  let count = 0;
  for (const ss of subsets) {
    const addresses = arr(ss.addresses);
    if (arr(ss.ports).length === 0) {
      for (const addr of addresses) {
        if (list.length === max) more = true;
        if (!more) list.push(str(addr.ip));
        count++;
      }
    } else {
      for (const port of arr(ss.ports)) {
        if (ports && !ports.has(str(port.name))) continue;
        for (const addr of addresses) {
          if (list.length === max) more = true;
          if (!more) list.push(joinHostPort(str(addr.ip), goValue(port.port ?? 0)));
          count++;
        }
      }
    }
  }
  const text = list.join(',');
  return more ? `${text} + ${count - max} more...` : text;
}

export function describeService(service: Json, endpoints: Json, events: Json[] | undefined): string {
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
    if (str(spec.loadBalancerIP)) w.write(0, `IP:\t${str(spec.loadBalancerIP)}\n`);
    if (str(spec.externalName)) w.write(0, `External Name:\t${str(spec.externalName)}\n`);
    const ingress = arr(service.status?.loadBalancer?.ingress);
    if (ingress.length > 0)
      w.write(0, `LoadBalancer Ingress:\t${ingress.map((i) => str(i.ip) || str(i.hostname)).join(', ')}\n`);
    for (const sp of arr(spec.ports)) {
      const name = str(sp.name) || '<unset>';
      const protocol = str(sp.protocol);
      w.write(0, `Port:\t${name}\t${goValue(sp.port ?? 0)}/${protocol}\n`);
      if (typeof sp.targetPort === 'string') w.write(0, `TargetPort:\t${sp.targetPort}/${protocol}\n`);
      else w.write(0, `TargetPort:\t${goValue(sp.targetPort ?? 0)}/${protocol}\n`);
      if (typeof sp.nodePort === 'number' && sp.nodePort !== 0)
        w.write(0, `NodePort:\t${name}\t${sp.nodePort}/${protocol}\n`);
      w.write(0, `Endpoints:\t${formatEndpoints(endpoints, new Set([str(sp.name)]))}\n`);
    }
    w.write(0, `Session Affinity:\t${str(spec.sessionAffinity)}\n`);
    if (str(spec.externalTrafficPolicy)) w.write(0, `External Traffic Policy:\t${str(spec.externalTrafficPolicy)}\n`);
    if (typeof spec.healthCheckNodePort === 'number' && spec.healthCheckNodePort !== 0)
      w.write(0, `HealthCheck NodePort:\t${spec.healthCheckNodePort}\n`);
    if (strings(spec.loadBalancerSourceRanges).length > 0)
      w.write(0, `LoadBalancer Source Ranges:\t${strings(spec.loadBalancerSourceRanges).join(',')}\n`);
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

/** A Service's endpoints for one of its ports ("" name: the unnamed one), or the read's error. */
async function serviceEndpoints(
  related: RelatedReader,
  namespace: string,
  serviceName: string,
  portMatches: (sp: Json) => boolean,
): Promise<{ ok: true; text: string } | { ok: false; step: 'endpoints' | 'service'; error: string }> {
  let endpoints: Json;
  try {
    endpoints = await related.get('endpoints', namespace, serviceName);
  } catch (err) {
    if (related.isAborted()) throw err;
    return { ok: false, step: 'endpoints', error: errorText(err) };
  }
  let service: Json;
  try {
    service = await related.get('services', namespace, serviceName);
  } catch (err) {
    if (related.isAborted()) throw err;
    return { ok: false, step: 'service', error: errorText(err) };
  }
  let portName = '';
  for (const sp of arr(service.spec?.ports)) if (portMatches(sp)) portName = str(sp.name);
  return { ok: true, text: formatEndpoints(endpoints, new Set([portName])) };
}

/** describeBackendV1: "svc:port (endpoints)" or the resource it names. */
async function backendV1(related: RelatedReader, namespace: string, backend: Json): Promise<string> {
  if (backend.service) {
    const svc = obj(backend.service);
    const number = typeof svc.port?.number === 'number' ? svc.port.number : 0;
    const portName = str(svc.port?.name);
    const sb = `${str(svc.name)}:${number !== 0 ? number : portName}`;
    const found = await serviceEndpoints(
      related,
      namespace,
      str(svc.name),
      (sp) => (number !== 0 && number === sp.port) || (number === 0 && portName !== '' && portName === sp.name),
    );
    if (!found.ok)
      return found.step === 'endpoints' ? `${sb} (<error: ${found.error}>)` : `${sb}(<error: ${found.error}>)`;
    return `${sb} (${found.text})`;
  }
  if (backend.resource) {
    const r = obj(backend.resource);
    const group = r.apiGroup === undefined || r.apiGroup === null ? '' : str(r.apiGroup);
    return `APIGroup: ${group}, Kind: ${str(r.kind)}, Name: ${str(r.name)}`;
  }
  return '';
}

/** describeBackendV1beta1: the endpoints of serviceName's port (or the error). */
async function backendV1beta1(related: RelatedReader, namespace: string, backend: Json): Promise<string> {
  const port = backend.servicePort;
  const found = await serviceEndpoints(related, namespace, str(backend.serviceName), (sp) =>
    typeof port === 'number' ? port === sp.port : str(port) === sp.name,
  );
  return found.ok ? found.text : `<error: ${found.error}>`;
}

const backendString = (b: Json) =>
  `${str(b.serviceName)}:${typeof b.servicePort === 'number' ? b.servicePort : str(b.servicePort)}`;

export async function describeIngress(ing: Json, events: Json[] | undefined, related: RelatedReader): Promise<string> {
  const v1beta1 = str(ing.apiVersion).endsWith('/v1beta1');
  const meta = obj(ing.metadata);
  const spec = obj(ing.spec);
  const namespace = str(meta.namespace);
  let def = obj(v1beta1 ? spec.backend : spec.defaultBackend);
  let defNamespace = namespace;
  if (!(v1beta1 ? spec.backend : spec.defaultBackend)) {
    def = v1beta1
      ? { serviceName: 'default-http-backend', servicePort: 80 }
      : { service: { name: 'default-http-backend', port: { number: 80 } } };
    defNamespace = 'kube-system';
  }
  const describeBackend = (ns: string, b: Json) =>
    v1beta1 ? backendV1beta1(related, ns, b) : backendV1(related, ns, b);
  const defText = v1beta1
    ? `${backendString(def)} (${await describeBackend(defNamespace, def)})`
    : await describeBackend(defNamespace, def);

  const rules: Array<{ host: string; paths: Array<{ path: string; backend: string }> }> = [];
  for (const rule of arr(spec.rules)) {
    if (!rule.http) continue;
    const paths = [];
    for (const p of arr(rule.http.paths)) {
      const b = obj(p.backend);
      const text = v1beta1
        ? `${backendString(b)} (${await describeBackend(namespace, b)})`
        : await describeBackend(namespace, b);
      paths.push({ path: str(p.path), backend: text });
    }
    rules.push({ host: str(rule.host) || '*', paths });
  }

  return tabbed((w) => {
    w.write(0, `Name:\t${str(meta.name)}\n`);
    w.write(0, `Namespace:\t${namespace}\n`);
    w.write(0, `Address:\t${loadBalancerAddresses(obj(ing.status?.loadBalancer))}\n`);
    w.write(0, `Default backend:\t${defText}\n`);
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
    if (rules.length === 0) w.write(1, v1beta1 ? `*\t* \t${defText}\n` : `*\t*\t${defText}\n`);
    printAnnotationsMultiline(w, 'Annotations', meta.annotations);
    describeEvents(w, events);
  });
}
