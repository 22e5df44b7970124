import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { BOOTSTRAP_SOURCE } from "../../src/functions/bootstrap";
import { denoBinary } from "../../src/functions/deno";
import { testTempDir } from "../helpers/tempDir";

/**
 * A worker's stdin is its supervisor pipe: the function's variables come first, as one line, and the end of
 * the pipe (its Strata process gone, on a host without a parent-death signal too) ends the worker.
 */
describe("the worker bootstrap's supervisor pipe", () => {
  it("serves with the variables of the first line, and exits when the pipe ends", async () => {
    const dir = testTempDir("strata-supervisor-");
    const bootstrap = path.join(dir, "bootstrap.js");
    const entry = path.join(dir, "index.ts");
    const socket = path.join(dir, "worker.sock");
    writeFileSync(bootstrap, BOOTSTRAP_SOURCE);
    writeFileSync(entry, 'Deno.serve(() => new Response(Deno.env.get("GREETING")))');
    const worker = spawn(
      denoBinary(),
      [
        "run",
        "--no-prompt",
        "--no-config",
        "--quiet",
        `--allow-read=${dir}`,
        `--allow-write=${dir}`,
        "--allow-env",
        "--allow-net",
        bootstrap,
        socket,
        `file://${entry}`,
        path.join(dir, "api.sock"),
      ],
      { stdio: ["pipe", "ignore", "pipe"], env: { DENO_DIR: path.join(dir, "cache"), NO_COLOR: "1" } },
    );
    let stderr = "";
    worker.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => worker.once("exit", (code) => resolve(code)));
    worker.stdin!.write(`${JSON.stringify({ SUPABASE_URL: "http://abc.localhost:1", GREETING: "hi" })}\n`);

    const ask = () =>
      new Promise<string>((resolve) => {
        http
          .get({ socketPath: socket, path: "/" }, (res) => {
            let text = "";
            res.on("data", (d: Buffer) => (text += d.toString()));
            res.on("end", () => resolve(text));
          })
          .on("error", (e) => resolve(`error: ${e.message}`));
      });
    // Asked until the function listens (it compiles first), or the worker has ended.
    let answer = await ask();
    for (let i = 0; i < 300 && answer.startsWith("error") && worker.exitCode === null; i++) {
      await new Promise((r) => setTimeout(r, 100));
      answer = await ask();
    }
    try {
      // What the worker printed, when it did not answer, says why.
      expect({ answer, stderr: answer === "hi" ? "" : stderr }).toEqual({ answer: "hi", stderr: "" });
      // The pipe ends as it does when the process holding it dies: the worker exits by itself.
      worker.stdin!.end();
      expect(await exited).toBe(0);
    } finally {
      worker.kill("SIGKILL");
    }
  });
});
