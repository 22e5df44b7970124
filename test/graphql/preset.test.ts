import { makePgService } from "@dataplan/pg/adaptors/pg";
import { grafast } from "grafast";
import { makeSchema } from "graphile-build";
import pg from "pg";
import { PgGraphqlPreset } from "../../presets/PgGraphqlPreset";
import { createTestDatabase, dropTestDatabase } from "../helpers/db";

describe("PgGraphqlPreset in a plain PostGraphile v5 app", () => {
  let dbUrl: string;
  let pool: pg.Pool;
  beforeAll(async () => {
    dbUrl = await createTestDatabase();
    pool = new pg.Pool({ connectionString: dbUrl, max: 2 });
    await pool.query(
      `create table public.blog_post(id int primary key, title text not null);
       insert into public.blog_post values (1, 'hello'), (2, 'world');`,
    );
  });
  afterAll(async () => {
    await pool.end();
    await dropTestDatabase(dbUrl);
  });

  it("builds the pg_graphql schema with extends: [PgGraphqlPreset] and answers a query", async () => {
    const { schema, resolvedPreset } = await makeSchema({
      extends: [PgGraphqlPreset],
      pgServices: [makePgService({ pool, schemas: ["public"] })],
    });
    const result = await grafast({
      schema,
      resolvedPreset,
      requestContext: {},
      source: `{ blog_postCollection(filter: { id: { gt: 1 } }) { edges { cursor node { nodeId title } } } }`,
    });
    expect(result).toEqual({
      data: {
        blog_postCollection: {
          edges: [
            {
              cursor: Buffer.from("[2]").toString("base64"),
              node: {
                nodeId: Buffer.from('["public", "blog_post", 2]').toString("base64"),
                title: "world",
              },
            },
          ],
        },
      },
    });
  });
});
