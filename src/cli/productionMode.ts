/**
 * `strata start` runs its libraries in production mode unless told otherwise (an explicit NODE_ENV or
 * GRAPHILE_ENV wins). graphql-js reads NODE_ENV once, when it loads: in development mode its type checks
 * (`isNonNullType` and the like, run per request to coerce variables) inspect every value that is not of
 * the type asked, a measurable cost on every request with variables. So this module is imported before
 * anything that loads graphql, grafast or Express.
 */
if (process.argv[2] === "start") {
  process.env.NODE_ENV ??= "production";
  process.env.GRAPHILE_ENV ??= "production";
}

// The compiled modules' V8 code is cached on disk (Node 22's compile cache, in the OS's temporary directory):
// a start after the first loads the server's ~2,000 modules without compiling them again.
(require("node:module") as { enableCompileCache?: () => unknown }).enableCompileCache?.();

export {};
