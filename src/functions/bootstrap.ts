/**
 * The module each worker process runs first (Deno, not Node): it sets the function's environment (read
 * from stdin, which it then watches: its end means Strata is gone, and the worker exits), sends calls to
 * the project's own API over the worker's API socket, takes over `Deno.serve` so that the function's
 * handler listens on the worker's unix socket, then imports the function's entrypoint. Arguments: socket path, entrypoint file URL, API socket path. Kept as text: it is written
 * under the data directory at start, since Deno runs files, and it is not part of the Node program.
 */
export const BOOTSTRAP_SOURCE = `
const [socketPath, entrypoint, apiSocketPath] = Deno.args;
// Variables Deno itself needs (its cache) are not the function's. DENO_TLS_CA_STORE stays: Deno reads
// it when it first downloads a module.
for (const name of ["DENO_DIR", "DENO_NO_UPDATE_CHECK", "NO_COLOR", "DENO_NODE_SHIM_ACTIVE", "PATH"]) {
  Deno.env.delete(name);
}
// stdin is the supervisor pipe (see worker.ts): the function's own variables as one JSON line (not the
// process's environment), then nothing until Strata's end closes it, when the worker exits. The exit is taken
// before the function's code runs, which cannot replace it.
const exit = Deno.exit;
const supervisor = Deno.stdin.readable.pipeThrough(new TextDecoderStream()).getReader();
let received = "";
while (!received.includes("\\n")) {
  const { value, done } = await supervisor.read();
  if (done) exit(1);
  received += value;
}
for (const [name, value] of Object.entries(JSON.parse(received.slice(0, received.indexOf("\\n"))))) {
  Deno.env.set(name, value);
}
(async () => {
  try {
    while (!(await supervisor.read()).done);
  } finally {
    exit(0);
  }
})();

// The runtime's internals (its ops) stay out of the function's reach, so the wrappers below are the only
// way to what they wrap.
delete Deno[Deno.internal];

// Deno checks a SOCKS proxy's name, never the address it resolves to, and vsock is no IP network: neither
// is the function's (see network.ts).
const createHttpClient = Deno.createHttpClient;
Deno.createHttpClient = function (options) {
  const proxy = options?.proxy;
  if (proxy && (/^(socks5|vsock)$/i.test(proxy.transport ?? "") || /^socks/i.test(String(proxy.url ?? "")))) {
    throw new Deno.errors.NotCapable("SOCKS and vsock proxies are not available to edge functions");
  }
  return createHttpClient(options);
};
for (const name of ["connect", "listen"]) {
  const original = Deno[name];
  Deno[name] = function (options) {
    if (options?.transport === "vsock") throw new Deno.errors.NotCapable("vsock is not available to edge functions");
    return original(options);
  };
}

// The project's API (SUPABASE_URL) is on this machine, which the network rules refuse: its calls go over
// the API socket instead, where Strata serves the project's API and nothing else (see channel.ts). Deno
// still checks where a proxied request's host resolves, so they carry a name that resolves nowhere
// (.invalid, RFC 6761); Strata sets the project's own host.
const apiOrigin = new URL(Deno.env.get("SUPABASE_URL")).origin;
const apiClient = createHttpClient({ proxy: { transport: "unix", path: apiSocketPath } });
const API_HOST = "project-api.invalid";

/** The URL to call over the API socket for a URL of the project's API (http or ws), else undefined. */
function overApiSocket(url) {
  const target = URL.parse(url);
  if (!target) return undefined;
  const scheme = { "ws:": "http:", "wss:": "https:" }[target.protocol] ?? target.protocol;
  if (scheme + "//" + target.host !== apiOrigin) return undefined;
  target.host = API_HOST;
  return target.href;
}

const nativeFetch = globalThis.fetch;
globalThis.fetch = function fetch(input, init) {
  const target = overApiSocket(input instanceof Request ? input.url : String(input));
  if (!target) return nativeFetch(input, init);
  return nativeFetch(new Request(target, new Request(input, init)), { client: apiClient });
};

// realtime-js opens a WebSocket to SUPABASE_URL.
const NativeWebSocket = globalThis.WebSocket;
globalThis.WebSocket = class WebSocket extends NativeWebSocket {
  constructor(url, protocols) {
    const target = overApiSocket(String(url));
    if (!target) {
      super(url, protocols);
      return;
    }
    const init = protocols !== null && typeof protocols === "object" && !Array.isArray(protocols)
      ? protocols
      : { protocols: protocols === undefined ? [] : [protocols].flat() };
    super(target, { ...init, client: apiClient });
  }
};

const serve = Deno.serve.bind(Deno);
let serving = false;

function handlerOf(a, b) {
  if (typeof a === "function") return a;
  if (typeof b === "function") return b;
  if (a && typeof a.handler === "function") return a.handler;
  throw new TypeError("Deno.serve needs a handler");
}

// Requests arrive on a unix socket, with the URL the client called as their target (Strata sends it), which
// is then the request's URL as it is. One without it reads http+unix://<Host>/...: the function sees the URL
// the client called in a copy (which costs the worker several times a small function's own work).
function asCalled(req) {
  if (!req.url.startsWith("http+unix:")) return req;
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
// A module that fails while it loads is a boot error: the worker says why and exits (the supervisor pipe
// would keep it alive, serving nothing).
let module;
try {
  module = await import(entrypoint);
} catch (e) {
  console.error(e);
  exit(1);
}
if (!serving && typeof module.default?.fetch === "function") {
  Deno.serve((req, info) => module.default.fetch(req, info));
}
`;
