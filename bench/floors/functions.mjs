// The edge functions floor (Deno, not Node): the benchmark's function module served by Deno.serve itself on a
// TCP port, nothing in between. `deno run --allow-net --allow-read bench/floors/functions.mjs <port> <module>`.
const [port, module] = Deno.args;
const serve = Deno.serve.bind(Deno);
// The function calls Deno.serve(handler) as it would under Strata; here it listens on the port.
Deno.serve = (handler) =>
  serve({ port: Number(port), hostname: "127.0.0.1", onListen: () => console.log("listening") }, handler);
await import(new URL(module, `file://${Deno.cwd()}/`).href);
