import { startTestServer, type TestServer } from "../helpers/server";
import { graphql } from "./client";

/** DDL run straight in the database reaches the API through the DDL watch, without a restart. */
describe("GraphQL after schema changes made in the database", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await server.sql(`
      comment on schema public is '@graphql({"inflect_names": true})';
      create function default_label() returns int stable language sql as 'select 7';
      create function current_label(label int default default_label()) returns int stable language sql as 'select label';
    `);
  });
  afterAll(() => server.stop());

  async function eventually(query: string, expected: unknown): Promise<void> {
    let last: unknown;
    for (let attempt = 0; attempt < 50; attempt++) {
      last = await graphql(server, query);
      if (JSON.stringify(last) === JSON.stringify(expected)) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(last).toEqual(expected);
  }

  it("answers a function's new result type once it is recreated with another one", async () => {
    // Several requests, so pooled connections hold the statement prepared for the old result type.
    for (let i = 0; i < 5; i++) await eventually("{ currentLabel }", { data: { currentLabel: 7 } });
    await server.sql(`
      drop function current_label(int);
      drop function default_label();
      create function default_label() returns text stable language sql as $$ select 'seven' $$;
      create function current_label(label text default default_label()) returns text stable language sql
        as 'select label';
    `);
    for (let i = 0; i < 5; i++) await eventually("{ currentLabel }", { data: { currentLabel: "seven" } });
  });

  it("says why it will not load a schema whose comment directive is malformed, until it is fixed", async () => {
    await server.sql(`
      create table shelf(id int primary key);
      create view shelf_view as select id from shelf;
      grant select on shelf, shelf_view to anon;
      comment on view shelf_view is '@graphql({"primary_key_columns": "id"})';
    `);
    await eventually("{ shelfCollection { edges { node { id } } } }", {
      errors: [
        {
          message:
            'Error while loading schema, check comment directives. invalid type: string "id", expected a sequence',
        },
      ],
    });
    await server.sql(`comment on view shelf_view is '@graphql({"primary_key_columns": ["id"]})';`);
    await eventually("{ shelfViewCollection { edges { node { id } } } }", {
      data: { shelfViewCollection: { edges: [] } },
    });
  });
});
