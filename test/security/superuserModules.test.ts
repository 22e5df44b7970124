import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";

/**
 * Strata's superuser connection executes only statements Strata wrote about objects Strata owns (README,
 * "Who uses the superuser connection"). That section lists every module that reaches it, each with why no
 * tenant-controlled input does; a module that starts using it without being listed (and argued) fails here.
 */
const ROOT = path.resolve(__dirname, "../..");

/** The names through which code reaches a superuser connection. */
const PROJECT_SUPERUSER = /\b(adminPool|adminUrl)\b/; // a project's database, or the cluster
const CONTROL_SUPERUSER = /\b(platformPool|controlUrl)\b/; // the control plane's database

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return sourceFiles(full);
    return name.endsWith(".ts") ? [full] : [];
  });
}

/** Modules (paths from the project root) using each kind of superuser connection. */
function modulesUsing(): { project: string[]; control: string[] } {
  const project: string[] = [];
  const control: string[] = [];
  for (const file of [...sourceFiles(path.join(ROOT, "src")), ...sourceFiles(path.join(ROOT, "plugins"))]) {
    // Comments may name the connection without using it.
    const code = readFileSync(file, "utf8").replace(/\/\*[\s\S]*?\*\/|(^|[^:])\/\/.*$/gm, "$1");
    const module = path.relative(ROOT, file);
    if (PROJECT_SUPERUSER.test(code)) project.push(module);
    else if (CONTROL_SUPERUSER.test(code)) control.push(module);
  }
  return { project, control };
}

/** The README's table rows: `| `path` | connection | why |`, a path ending in `/` naming a folder. */
function listedInReadme(): { path: string; connection: string; why: string }[] {
  const readme = readFileSync(path.join(ROOT, "README.md"), "utf8");
  const start = readme.indexOf("### Who uses the superuser connection");
  expect(start).toBeGreaterThan(0);
  const section = readme.slice(start, readme.indexOf("\n## ", start));
  return [...section.matchAll(/^\| `([^`]+)` \| ([^|]+) \| ([^|]+) \|$/gm)].map((m) => ({
    path: m[1],
    connection: m[2].trim(),
    why: m[3].trim(),
  }));
}

describe("The modules that use Strata's superuser connection", () => {
  const rows = listedInReadme();
  const { project, control } = modulesUsing();

  it("are each listed in the README with why no tenant input reaches them", () => {
    // A project database's superuser (where the tenants' objects live) is listed module by module.
    const exact = new Set(rows.map((r) => r.path));
    expect(project.filter((m) => !exact.has(m))).toEqual([]);
    // The control plane's may be listed by folder (Strata's own rows, the tenant's values bound).
    const covers = (m: string) =>
      rows.some((r) => r.path === m || (r.path.endsWith("/") && m.startsWith(r.path)));
    expect(control.filter((m) => !covers(m))).toEqual([]);
    for (const row of rows) expect(row.why.length).toBeGreaterThan(20);
  });

  it("lists no module that does not use it (the list stays the truth)", () => {
    const using = new Set([...project, ...control]);
    const stale = rows.filter((r) =>
      r.path.endsWith("/") ? ![...using].some((m) => m.startsWith(r.path)) : !using.has(r.path),
    );
    expect(stale.map((r) => r.path)).toEqual([]);
  });

  it("never lets the GraphQL preset's plugins reach it", () => {
    expect([...project, ...control].filter((m) => m.startsWith("plugins/"))).toEqual([]);
  });
});
