import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { adminQuery, createTestDatabase, dropTestDatabase } from "../helpers/db";
import { testTempDir } from "../helpers/tempDir";

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, "../..");

/**
 * The preset as a library: `npm pack` builds compiled JavaScript with type declarations and an `exports`
 * map; a plain PostGraphile app (JavaScript, no tsx) with that tarball in its node_modules extends the
 * preset and answers a pg_graphql-shaped query.
 */
describe("the npm package", () => {
  let dbUrl: string;
  beforeAll(async () => {
    dbUrl = await createTestDatabase();
    await adminQuery(
      `create table public.shelf (id int primary key, label text not null);
       insert into public.shelf values (1, 'first'), (2, 'second');`,
      [],
      dbUrl,
    );
  });
  afterAll(() => dropTestDatabase(dbUrl));

  it("installs into a plain PostGraphile app that extends the preset and answers a query", async () => {
    const work = testTempDir("strata-pack-");
    const { stdout } = await run("npm", ["pack", "--json", "--pack-destination", work], {
      cwd: ROOT,
      env: { ...process.env, npm_config_loglevel: "silent" },
      maxBuffer: 64 * 1024 * 1024,
    });
    const [packed] = JSON.parse(stdout.slice(stdout.indexOf("["))) as {
      filename: string;
      files: { path: string }[];
    }[];
    const files = packed.files.map((f) => f.path);
    expect(files).toContain("dist/presets/PgGraphqlPreset.js");
    expect(files).toContain("dist/presets/PgGraphqlPreset.d.ts");
    expect(files.some((f) => f.endsWith(".ts") && !f.endsWith(".d.ts"))).toBe(false);

    // The app: the tarball unpacked as its `strata` package, the other packages from this checkout's install.
    const app = path.join(work, "app");
    const modules = path.join(app, "node_modules");
    mkdirSync(path.join(modules, "strata"), { recursive: true });
    await run("tar", [
      "-xzf",
      path.join(work, packed.filename),
      "-C",
      path.join(modules, "strata"),
      "--strip-components=1",
    ]);
    for (const name of readdirSync(path.join(ROOT, "node_modules"))) {
      if (name === ".bin" || existsSync(path.join(modules, name))) continue;
      symlinkSync(path.join(ROOT, "node_modules", name), path.join(modules, name));
    }
    writeFileSync(
      path.join(app, "package.json"),
      JSON.stringify({ name: "app", type: "module", private: true }),
    );
    writeFileSync(
      path.join(app, "app.js"),
      `import { PgGraphqlPreset } from "strata/presets/PgGraphqlPreset";
       import { postgraphile } from "postgraphile";
       import { makePgService } from "postgraphile/adaptors/pg";
       import { grafast } from "postgraphile/grafast";
       const pgl = postgraphile({
         extends: [PgGraphqlPreset],
         pgServices: [makePgService({ connectionString: process.env.DATABASE_URL, schemas: ["public"] })],
       });
       const { schema, resolvedPreset } = await pgl.getSchemaResult();
       const result = await grafast({
         schema,
         resolvedPreset,
         requestContext: {},
         source: "{ shelfCollection(orderBy: [{ id: AscNullsLast }]) { edges { node { id label } } } }",
       });
       console.log(JSON.stringify(result));
       await pgl.release();`,
    );
    const out = await run(process.execPath, ["app.js"], {
      cwd: app,
      env: { ...process.env, DATABASE_URL: dbUrl },
    });
    expect(JSON.parse(out.stdout.trim().split("\n").pop()!)).toEqual({
      data: {
        shelfCollection: {
          edges: [{ node: { id: 1, label: "first" } }, { node: { id: 2, label: "second" } }],
        },
      },
    });
  }, 180_000);
});
