import express from "express";
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { gzipSync } from "node:zlib";
import { startTestServer, type TestServer } from "../helpers/server";

/**
 * The data APIs read the common request body themselves (src/http/plainBody.ts) and every other one through
 * body-parser (express.json for GraphQL, express.raw for REST): whatever the body, the answer must be the one
 * body-parser gives. For GraphQL the reference is express.json itself, in a server of its own, answering what it
 * parsed or its error as Strata's error handler words it; for REST, the rows a write leaves, read through psql.
 */
describe("data API request bodies", () => {
  let server: TestServer;
  let reference: Server;
  let referenceUrl: string;

  beforeAll(async () => {
    server = await startTestServer();
    await server.sql("create table note(id int primary key, body text); grant all on note to service_role");
    const app = express();
    app.post("/", express.json({ limit: "5mb" }), (req, res) => {
      res.json({ body: req.body as unknown });
    });
    app.use(
      (
        err: { status: number; message: string },
        _req: express.Request,
        res: express.Response,
        _next: express.NextFunction,
      ) => {
        res.status(err.status).json({ message: `Bad request: ${err.message}` });
      },
    );
    reference = app.listen(0, "127.0.0.1");
    await new Promise((resolve) => reference.once("listening", resolve));
    referenceUrl = `http://127.0.0.1:${(reference.address() as AddressInfo).port}/`;
  });
  afterAll(async () => {
    await new Promise((resolve) => reference.close(resolve));
    await server.stop();
  });

  const post = (url: string, body: string | Buffer, headers: Record<string, string>) =>
    fetch(url, { method: "POST", body: body as BodyInit, headers: { apikey: server.anonKey, ...headers } });

  it("answers a body that does not parse with express.json's own error", async () => {
    const cases: [string | Buffer, Record<string, string>][] = [
      ['{"query": "{ __typename }"', { "content-type": "application/json" }],
      ['"a string"', { "content-type": "application/json" }],
      ["  [1, 2", { "content-type": "application/json; charset=utf-8" }],
      ["{\u00a0}", { "content-type": "application/json" }],
      ['{"query": "x"}', { "content-type": "application/json; charset=latin1" }],
      [Buffer.alloc(5 * 1024 * 1024 + 1, " "), { "content-type": "application/json" }],
    ];
    for (const [body, headers] of cases) {
      const ours = await post(`${server.url}/graphql/v1`, body, headers);
      const theirs = await post(referenceUrl, body, headers);
      expect({ status: ours.status, body: await ours.json() }).toEqual({
        status: theirs.status,
        body: await theirs.json(),
      });
      expect(ours.status).toBeGreaterThanOrEqual(400);
      expect(ours.status).toBeLessThan(500);
    }
  });

  it("reads the common body, and compressed, chunked, BOM-prefixed or empty ones as express.json does", async () => {
    const query = JSON.stringify({ query: "{ __typename }" });
    const typename = { data: { __typename: "Query" } };
    const asked = async (body: string | Buffer | ReadableStream, headers: Record<string, string>) => {
      const res = await fetch(`${server.url}/graphql/v1`, {
        method: "POST",
        body: body as BodyInit,
        headers: { apikey: server.anonKey, ...headers },
        duplex: "half",
      } as RequestInit);
      return { status: res.status, body: (await res.json()) as unknown };
    };
    const json = { "content-type": "application/json" };
    expect(await asked(query, json)).toEqual({ status: 200, body: typename });
    expect(await asked(query, { "content-type": "Application/JSON; Charset=UTF-8" })).toEqual({
      status: 200,
      body: typename,
    });
    expect(await asked(gzipSync(query), { ...json, "content-encoding": "gzip" })).toEqual({
      status: 200,
      body: typename,
    });
    expect(await asked(`\ufeff${query}`, json)).toEqual({ status: 200, body: typename });
    const chunked = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(query.slice(0, 5)));
        controller.enqueue(new TextEncoder().encode(query.slice(5)));
        controller.close();
      },
    });
    expect(await asked(chunked, json)).toEqual({ status: 200, body: typename });
    // No body: express.json's `{}`, which has no query.
    const empty = await asked("", json);
    expect(empty.body).toEqual({ data: null, errors: [{ message: "No query" }] });
  });

  it("writes REST bodies read directly, compressed or chunked alike", async () => {
    const write = (body: string | Buffer | ReadableStream, headers: Record<string, string>) =>
      fetch(`${server.url}/rest/v1/note`, {
        method: "POST",
        body: body as BodyInit,
        headers: {
          apikey: server.serviceKey,
          authorization: `Bearer ${server.serviceKey}`,
          "content-type": "application/json",
          ...headers,
        },
        duplex: "half",
      } as RequestInit);
    expect((await write(JSON.stringify({ id: 1, body: "plain" }), {})).status).toBe(201);
    expect(
      (await write(gzipSync(JSON.stringify({ id: 2, body: "gzip" })), { "content-encoding": "gzip" })).status,
    ).toBe(201);
    const text = JSON.stringify([{ id: 3, body: "chunked" }]);
    const chunked = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(text.slice(0, 7)));
        controller.enqueue(new TextEncoder().encode(text.slice(7)));
        controller.close();
      },
    });
    expect((await write(chunked, {})).status).toBe(201);
    const rows = await server.sql("select id, body from note order by id");
    expect(rows.rows).toEqual([
      { id: 1, body: "plain" },
      { id: 2, body: "gzip" },
      { id: 3, body: "chunked" },
    ]);
  });
});
