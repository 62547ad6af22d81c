// Route schemas compiled when first needed instead of before the server listens.
//
// Fastify compiles a validator (Ajv) and a serializer (fast-json-stringify) for every route with a
// schema before it listens: for kiteline's few hundred routes that was over a second of a start of
// four (docs/fleet.md, "Where the start goes"). These compilers are Fastify's own, with the same
// options and shared schemas; only the moment moves. A route's schema is compiled at its first
// request, and whatever no request has compiled yet is compiled in the background right after the
// server listens (`compileRest`), in slices, so requests are not held up. A schema that does not
// compile fails `compileRest`, as it failed Fastify's start: the CLI exits, the tests' gateway
// helper fails its test.
import ajvCompiler, { type ValidatorFactory } from '@fastify/ajv-compiler';
import serializerCompiler, { type SerializerFactory } from '@fastify/fast-json-stringify-compiler';
import { setImmediate as nextTurn } from 'node:timers/promises';

/** How long one background slice may hold the event loop. */
const SLICE_MS = 10;

type Compiled = ((data: unknown) => unknown) & { errors?: unknown };
/** A compiler factory as Fastify calls it: (shared schemas, options) → (route's schema) → function. */
type Factory = (externals: unknown, options: unknown) => (route: unknown) => Compiled;

export class LazySchemas {
  private readonly pending = new Set<() => void>();

  readonly compilersFactory = {
    buildValidator: this.lazily(ajvCompiler() as unknown as Factory) as unknown as ValidatorFactory,
    buildSerializer: this.lazily(serializerCompiler() as unknown as Factory) as unknown as SerializerFactory,
  };

  /** Compiles every schema no request has needed yet; rejects with the first that does not compile. */
  async compileRest(): Promise<void> {
    let sliceStart = performance.now();
    for (const compile of this.pending) {
      compile();
      if (performance.now() - sliceStart > SLICE_MS) {
        await nextTurn();
        sliceStart = performance.now();
      }
    }
  }

  /** Wraps a compiler factory so that each route's function is compiled at its first call. */
  private lazily(factory: Factory): Factory {
    return (externals, options) => {
      // The compiler itself (an Ajv instance with the shared schemas, checked against JSON Schema's
      // meta-schema) is made at the first compile too.
      let compile: ((route: unknown) => Compiled) | undefined;
      return (route) => {
        let compiled: Compiled | undefined;
        const compileNow = () => {
          this.pending.delete(compileNow);
          compile ??= factory(externals, options);
          compiled ??= compile(route);
          return compiled;
        };
        this.pending.add(compileNow);
        const first: Compiled = (data) => (compiled ?? compileNow())(data);
        // Fastify reads a validator's errors from the function after it returned false.
        Object.defineProperty(first, 'errors', { get: () => compiled?.errors });
        return first;
      };
    };
  }
}
