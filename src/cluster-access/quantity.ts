// Kubernetes resource quantities ("500m", "2", "1Gi", "128974848", "1.5e3") as Go's
// resource.Quantity has them: parsed exactly (in nano-units, BigInt, rounded up), added, compared,
// and printed in Go's canonical form (String: "1500m", "2", "1k", "128Mi"), keeping the format
// (decimal or binary suffix) of the quantity that was first, as Go's Quantity.Add does. The
// overview and the live pod list read milli-units; kubectl describe's sums use the rest
// (describe/quantity.ts).
export type QuantityFormat = 'DecimalSI' | 'BinarySI' | 'DecimalExponent';

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
    readonly format: QuantityFormat,
  ) {}

  static zero(format: QuantityFormat = 'DecimalSI'): Quantity {
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
    let format: QuantityFormat = 'DecimalSI';
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

/** The quantity in milli-units (Go's MilliValue, rounded up), or 0 for anything that is not a quantity. */
export function milliValue(quantity: unknown): number {
  return Quantity.parse(quantity).milliValue();
}
