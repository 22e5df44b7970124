/**
 * The module each worker process runs first (Deno, not Node): it takes over `Deno.serve` so that the
 * function's handler listens on the worker's unix socket, then imports the function's entrypoint.
 * Arguments: socket path, entrypoint file URL. Kept as text: it is written next to the deployed files'
 * root at start, since Deno runs files, and it is not part of the Node program.
 */
export const BOOTSTRAP_SOURCE = `
const [socketPath, entrypoint] = Deno.args;
// Variables Deno itself needs (its cache) are not the function's. DENO_TLS_CA_STORE stays: Deno reads
// it when it first downloads a module.
for (const name of ["DENO_DIR", "DENO_NO_UPDATE_CHECK", "NO_COLOR", "DENO_NODE_SHIM_ACTIVE", "PATH"]) {
  Deno.env.delete(name);
}

const serve = Deno.serve.bind(Deno);
let serving = false;

function handlerOf(a, b) {
  if (typeof a === "function") return a;
  if (typeof b === "function") return b;
  if (a && typeof a.handler === "function") return a.handler;
  throw new TypeError("Deno.serve needs a handler");
}

// Requests arrive on a unix socket; the function sees the URL the client called.
function asCalled(req) {
  const proto = req.headers.get("x-forwarded-proto") === "https" ? "https:" : "http:";
  return new Request(req.url.replace(/^http\\+unix:/, proto), req);
}

async function answer(handler, req, info) {
  try {
    return await handler(asCalled(req), info);
  } catch (e) {
    console.error(e);
    return Response.json(
      { code: "WORKER_ERROR", message: "Function exited due to an error (please check logs)" },
      { status: 500, headers: { "sb-error-code": "EDGE_FUNCTION_ERROR" } },
    );
  }
}

Deno.serve = (a, b) => {
  const handler = handlerOf(a, b);
  if (serving) throw new Error("Deno.serve can be called once per function");
  serving = true;
  return serve({ path: socketPath, onListen() {} }, (req, info) => answer(handler, req, info));
};

// An error outside any request is logged; the worker keeps serving.
globalThis.addEventListener("unhandledrejection", (e) => {
  console.error(e.reason);
  e.preventDefault();
});
globalThis.addEventListener("error", (e) => {
  console.error(e.error ?? e.message);
  e.preventDefault();
});

// A module may also export its handler (\`export default { fetch(req) {...} }\`) instead of serving it.
const module = await import(entrypoint);
if (!serving && typeof module.default?.fetch === "function") {
  Deno.serve((req, info) => module.default.fetch(req, info));
}
`;
