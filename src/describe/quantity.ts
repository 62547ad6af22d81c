// Kubernetes resource quantities as kubectl's describers compute with them: parsed exactly (in
// nano-units, BigInt), added, compared, and printed in Go's canonical form (resource.Quantity's
// String: "1500m", "2", "1k", "128Mi"), keeping the format (decimal or binary suffix) of the
// quantity that was first, as Go's Quantity.Add does.
import { arr, obj, str, type Json } from './format.js';

type Format = 'DecimalSI' | 'BinarySI' | 'DecimalExponent';

const NANO = 1_000_000_000n;
const DECIMAL_SUFFIX: Record<string, number> = { n: -9, u: -6, m: -3, '': 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const BINARY_SUFFIX: Record<string, number> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
const QUANTITY = /^([+-]?)(\d*)(?:\.(\d*))?(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$/;

/** Division rounding up (towards +infinity) for BigInt. */
function ceilDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b !== 0n && a > 0n === b > 0n ? q + 1n : q;
}

export class Quantity {
  private constructor(
    /** The value in nano-units (rounded up). */
    readonly nanos: bigint,
    readonly format: Format,
  ) {}

  static zero(format: Format = 'DecimalSI'): Quantity {
    return new Quantity(0n, format);
  }

  /** Parses a quantity string (or a JSON number); anything else is zero. */
  static parse(value: unknown): Quantity {
    if (typeof value === 'number' && Number.isFinite(value)) value = String(value);
    if (typeof value !== 'string') return Quantity.zero();
    const m = QUANTITY.exec(value.trim());
    if (!m || (m[2] === '' && (m[3] ?? '') === '')) return Quantity.zero();
    const [, sign, whole, fraction = '', exponent, suffix = ''] = m;
    // digits × 10^-fraction.length × (10^e or 2^e), in nanos, rounded up
    let numerator = BigInt(`${whole || '0'}${fraction}`) * NANO;
    let denominator = 10n ** BigInt(fraction.length);
    let format: Format = 'DecimalSI';
    if (exponent) {
      format = 'DecimalExponent';
      const e = Number(exponent.slice(1));
      if (e >= 0) numerator *= 10n ** BigInt(e);
      else denominator *= 10n ** BigInt(-e);
    } else if (suffix in BINARY_SUFFIX) {
      format = 'BinarySI';
      numerator *= 2n ** BigInt(BINARY_SUFFIX[suffix]);
    } else {
      const e = DECIMAL_SUFFIX[suffix] ?? 0;
      if (e >= 0) numerator *= 10n ** BigInt(e);
      else denominator *= 10n ** BigInt(-e);
    }
    const nanos = ceilDiv(sign === '-' ? -numerator : numerator, denominator);
    return new Quantity(nanos, format);
  }

  isZero(): boolean {
    return this.nanos === 0n;
  }

  /** Go's Add: the sum, in this quantity's format (or the other's when this one is zero). */
  add(other: Quantity): Quantity {
    return new Quantity(this.nanos + other.nanos, this.nanos === 0n ? other.format : this.format);
  }

  cmp(other: Quantity): number {
    return this.nanos < other.nanos ? -1 : this.nanos > other.nanos ? 1 : 0;
  }

  /** Go's Value(): whole units, rounded up. */
  value(): number {
    return Number(ceilDiv(this.nanos, NANO));
  }

  /** Go's MilliValue(): milli-units, rounded up. */
  milliValue(): number {
    return Number(ceilDiv(this.nanos, 1_000_000n));
  }

  /** Go's canonical String(). */
  toString(): string {
    if (this.nanos === 0n) return '0';
    let format = this.format;
    if (format === 'BinarySI') {
      const small = this.nanos > -1024n * NANO && this.nanos < 1024n * NANO;
      if (small || this.nanos % NANO !== 0n) format = 'DecimalSI';
    }
    if (format === 'BinarySI') {
      let mantissa = this.nanos / NANO;
      let exponent = 0;
      while (exponent < 60 && mantissa % 1024n === 0n) {
        mantissa /= 1024n;
        exponent += 10;
      }
      const suffix = Object.entries(BINARY_SUFFIX).find(([, e]) => e === exponent)?.[0] ?? '';
      return `${mantissa}${suffix}`;
    }
    let mantissa = this.nanos;
    let exponent = -9;
    while (mantissa % 10n === 0n) {
      mantissa /= 10n;
      exponent += 1;
    }
    while (exponent % 3 !== 0) {
      mantissa *= 10n;
      exponent -= 1;
    }
    if (format === 'DecimalExponent') return exponent === 0 ? `${mantissa}` : `${mantissa}e${exponent}`;
    const suffix = Object.entries(DECIMAL_SUFFIX).find(([, e]) => e === exponent)?.[0];
    return suffix === undefined ? `${mantissa}e${exponent}` : `${mantissa}${suffix}`;
  }
}

/** A resource list (name → quantity) as Quantities. */
export type ResourceList = Map<string, Quantity>;

export function resourceList(value: unknown): ResourceList {
  const list: ResourceList = new Map();
  if (value && typeof value === 'object') {
    for (const [name, q] of Object.entries(value as Record<string, unknown>)) list.set(name, Quantity.parse(q));
  }
  return list;
}

function addInto(target: ResourceList, add: ResourceList): void {
  for (const [name, q] of add) {
    const known = target.get(name);
    target.set(name, known ? known.add(q) : q);
  }
}

function maxInto(target: ResourceList, other: ResourceList): void {
  for (const [name, q] of other) {
    const known = target.get(name);
    if (!known || q.cmp(known) > 0) target.set(name, q);
  }
}

function sumOf(...lists: ResourceList[]): ResourceList {
  const sum: ResourceList = new Map();
  for (const list of lists) addInto(sum, list);
  return sum;
}

function maxOf(...lists: ResourceList[]): ResourceList {
  const max: ResourceList = new Map();
  for (const list of lists) maxInto(max, list);
  return max;
}

const isRestartable = (container: Json) => container.restartPolicy === 'Always';

/**
 * A container's requests as the kubelet holds them: after an in-place resize, the larger of the spec's,
 * the status's and the allocated ones (the spec's left out when the resize is infeasible).
 */
function containerRequests(pod: Json, container: Json, statuses: Map<string, Json>): ResourceList {
  const specRequests = resourceList(container.resources?.requests);
  const status = statuses.get(str(container.name));
  if (!status?.resources) return specRequests;
  const conditions = arr(pod.status?.conditions);
  const pending = conditions.find((c) => c.type === 'PodResizePending');
  const infeasible = pending?.reason === 'Infeasible';
  const statusRequests = resourceList(status.resources.requests);
  const allocated = resourceList(status.allocatedResources);
  return infeasible ? maxOf(statusRequests, allocated) : maxOf(specRequests, statusRequests, allocated);
}

/**
 * kubectl's resourcehelper.PodRequestsAndLimits: containers and sidecars (restartable init containers)
 * summed; each other init container with the sidecars started before it, the largest of them as a
 * minimum; plus the pod's overhead (on limits only where a limit is set).
 */
export function podRequestsAndLimits(pod: Json): {
  requests: ResourceList;
  limits: ResourceList;
} {
  const spec = obj(pod.spec);
  const containers = arr(spec.containers);
  const initContainers = arr(spec.initContainers);
  const statuses = new Map<string, Json>();
  for (const list of [pod.status?.containerStatuses, pod.status?.initContainerStatuses])
    for (const status of arr(list)) statuses.set(str(status.name), status);

  const total = (of: (container: Json) => ResourceList): ResourceList => {
    const sum = sumOf(...containers.map(of));
    const sidecars: ResourceList = new Map();
    const initMax: ResourceList = new Map();
    for (const container of initContainers) {
      const own = of(container);
      if (isRestartable(container)) {
        addInto(sum, own);
        addInto(sidecars, own);
        maxInto(initMax, sidecars);
      } else {
        maxInto(initMax, sumOf(own, sidecars));
      }
    }
    maxInto(sum, initMax);
    return sum;
  };
  const requests = total((c) => containerRequests(pod, c, statuses));
  const limits = total((c) => resourceList(c.resources?.limits));
  if (spec.overhead && typeof spec.overhead === 'object') {
    const overhead = resourceList(spec.overhead);
    addInto(requests, overhead);
    for (const [name, q] of overhead) {
      const known = limits.get(name);
      if (known && !known.isZero()) limits.set(name, known.add(q));
    }
  }
  return { requests, limits };
}
