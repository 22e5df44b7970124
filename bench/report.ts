/**
 * What the service benchmarks share: a side-by-side table (floor, Strata, Strata/floor, target) printed with
 * the machine's load average, a child process that says "listening", and the Management API's calls.
 */
import { spawn, type ChildProcess } from "node:child_process";
import os from "node:os";

export interface Row {
  name: string;
  unit: string;
  floor: number;
  strata: number;
  /** "higher": Strata/floor must reach `target`; "lower": Strata/floor must stay under it (cold start). */
  better: "higher" | "lower";
  target: number;
}

const pad = (s: string | number, w: number) => String(s).padStart(w);
const fixed = (n: number) => (Number.isFinite(n) ? (n >= 100 ? n.toFixed(0) : n.toFixed(1)) : "n/a");

export function loadAverage(): string {
  return os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");
}

/** Prints one table; returns whether every row met its target. */
export function printTable(title: string, rows: Row[]): boolean {
  console.log(`\n${title}   (load average at the end: ${loadAverage()}, ${os.cpus().length} cores)`);
  console.log(
    `${"measure".padEnd(34)} ${pad("unit", 14)} ${pad("floor", 9)} ${pad("strata", 9)} ${pad("ratio", 6)} ${pad("target", 7)}  met`,
  );
  let all = true;
  for (const r of rows) {
    const ratio = r.strata / r.floor;
    const met = r.better === "higher" ? ratio >= r.target : ratio <= r.target;
    all &&= met;
    console.log(
      `${r.name.padEnd(34)} ${pad(r.unit, 14)} ${pad(fixed(r.floor), 9)} ${pad(fixed(r.strata), 9)} ${pad(ratio.toFixed(2), 6)} ${pad(`${r.better === "higher" ? "≥" : "≤"}${r.target}`, 7)}  ${met ? "yes" : "NO"}`,
    );
  }
  return all;
}

/** Starts a helper process (a floor, an S3 server) and waits for the line "listening". */
export async function startHelper(
  command: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<ChildProcess> {
  const child = spawn(command, args, {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise<void>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (d) => {
      out += d;
      if (out.includes("listening")) resolve();
    });
    child.once("exit", (code) => reject(new Error(`${command} ${args.join(" ")} exited (${code}): ${out}`)));
  });
  return child;
}

export async function stopHelper(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGTERM");
  await exited;
}

/** A Management API client of one server. */
export function management(base: string, token: string) {
  return async (method: string, pathname: string, body?: unknown): Promise<unknown> => {
    const res = await fetch(`${base}${pathname}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${pathname} failed (${res.status}): ${text.slice(0, 300)}`);
    return text ? JSON.parse(text) : undefined;
  };
}

export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** Whether `--name` is on the command line. */
export function flag(name: string): boolean {
  return process.argv.includes(`--${name}`);
}

export { freePort } from "./process";
