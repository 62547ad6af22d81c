// Kubernetes resource quantities ("500m", "2", "1Gi", "128974848", "1.5e3") as milli-units, the
// way Go's resource.Quantity.MilliValue() reports them (rounded up). Used by the overview and the
// live pod list. (describe/quantity.ts computes exactly, in Go's printed forms, for kubectl describe.)
const BINARY: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };
const DECIMAL: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};
const QUANTITY = /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$/;

/** The quantity in milli-units, or 0 for anything that is not a quantity. */
export function milliValue(quantity: unknown): number {
  if (typeof quantity === 'number' && Number.isFinite(quantity)) return Math.ceil(quantity * 1000);
  if (typeof quantity !== 'string') return 0;
  const match = QUANTITY.exec(quantity.trim());
  if (!match) return 0;
  const [, number, exponent, suffix] = match;
  let value = Number(number);
  if (exponent) value *= 10 ** Number(exponent.slice(1));
  else if (suffix) value *= BINARY[suffix] ?? DECIMAL[suffix] ?? 1;
  return Math.ceil(value * 1000 - 1e-9);
}
