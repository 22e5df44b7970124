import { startTestServer, type TestServer } from "../helpers/server";
import { clientFor, rest, waitForTable } from "./fixtures";

describe("REST reads through the JavaScript client", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await server.sql(`
      create table authors (id int primary key, name text not null, profile jsonb);
      create table books (id int primary key, title text not null, author_id int references authors, year int, tags text[]);
      create table readers (id int primary key, name text);
      create table loans (reader_id int references readers, book_id int references books, primary key (reader_id, book_id));
      insert into authors values (1, 'Ursula', '{"country": "US", "born": {"year": 1929}}'), (2, 'Italo', '{"country": "IT"}'), (3, 'Nobody', null);
      insert into books values (1, 'Earthsea', 1, 1968, '{fantasy,classic}'), (2, 'Dispossessed', 1, 1974, '{scifi}'),
                               (3, 'Invisible Cities', 2, 1972, '{classic}'), (4, 'Anonymous', null, null, '{}');
      insert into readers values (1, 'Ann'), (2, 'Bob');
      insert into loans values (1, 1), (1, 3), (2, 3);
    `);
    await waitForTable(server, "loans");
  });
  afterAll(() => server.stop());

  it("selects columns, aliases, casts and JSON paths in the order asked", async () => {
    const { data, error } = await clientFor(server)
      .from("authors")
      .select("id, who:name, id_text:id::text, country:profile->>country, profile->born->year")
      .order("id");
    expect(error).toBeNull();
    expect(data).toEqual([
      { id: 1, who: "Ursula", id_text: "1", country: "US", year: 1929 },
      { id: 2, who: "Italo", id_text: "2", country: "IT", year: null },
      { id: 3, who: "Nobody", id_text: "3", country: null, year: null },
    ]);
    expect(Object.keys(data![0])).toEqual(["id", "who", "id_text", "country", "year"]);
  });

  it("filters with the operator set, negation and nested logic", async () => {
    const books = clientFor(server).from("books");
    const titles = async (q: PromiseLike<{ data: { title: string }[] | null }>) =>
      (await q).data!.map((b) => b.title);
    expect(await titles(books.select("title").gt("year", 1970).order("id"))).toEqual([
      "Dispossessed",
      "Invisible Cities",
    ]);
    expect(await titles(books.select("title").ilike("title", "%EARTH%"))).toEqual(["Earthsea"]);
    expect(await titles(books.select("title").in("id", [2, 3]).order("id"))).toEqual([
      "Dispossessed",
      "Invisible Cities",
    ]);
    expect(await titles(books.select("title").is("year", null))).toEqual(["Anonymous"]);
    expect(await titles(books.select("title").not("year", "is", null).order("id"))).toHaveLength(3);
    expect(await titles(books.select("title").contains("tags", ["classic"]).order("id"))).toEqual([
      "Earthsea",
      "Invisible Cities",
    ]);
    expect(
      await titles(books.select("title").or("id.eq.4,and(year.gte.1970,year.lt.1973)").order("id")),
    ).toEqual(["Invisible Cities", "Anonymous"]);
    expect(await titles(books.select("title").eq("author_id", 1).neq("year", 1968))).toEqual([
      "Dispossessed",
    ]);
  });

  it("embeds parents, children and many-to-many relations", async () => {
    const { data } = await clientFor(server)
      .from("authors")
      .select("name, books(title)")
      .order("id")
      .order("id", { referencedTable: "books" });
    expect(data).toEqual([
      { name: "Ursula", books: [{ title: "Earthsea" }, { title: "Dispossessed" }] },
      { name: "Italo", books: [{ title: "Invisible Cities" }] },
      { name: "Nobody", books: [] },
    ]);
    const parents = await clientFor(server).from("books").select("title, authors(name)").eq("id", 4).single();
    expect(parents.data).toEqual({ title: "Anonymous", authors: null });
    const m2m = await clientFor(server).from("readers").select("name, books(title)").order("id");
    expect(m2m.data).toEqual([
      { name: "Ann", books: [{ title: "Earthsea" }, { title: "Invisible Cities" }] },
      { name: "Bob", books: [{ title: "Invisible Cities" }] },
    ]);
  });

  it("filters embedded rows, and drops parents without a match with !inner", async () => {
    const loose = await clientFor(server)
      .from("authors")
      .select("name, books(title)")
      .eq("books.year", 1974)
      .order("id");
    expect(loose.data!.map((a: any) => a.books.length)).toEqual([1, 0, 0]);
    const inner = await clientFor(server)
      .from("authors")
      .select("name, books!inner(title)")
      .eq("books.year", 1974);
    expect(inner.data).toEqual([{ name: "Ursula", books: [{ title: "Dispossessed" }] }]);
    const counted = await clientFor(server).from("authors").select("name, books(count)").order("id");
    expect(counted.data).toEqual([
      { name: "Ursula", books: [{ count: 2 }] },
      { name: "Italo", books: [{ count: 1 }] },
      { name: "Nobody", books: [{ count: 0 }] },
    ]);
  });

  it("orders, pages and counts", async () => {
    const page = await clientFor(server)
      .from("books")
      .select("id", { count: "exact" })
      .order("id", { ascending: false })
      .range(1, 2);
    expect(page.data).toEqual([{ id: 3 }, { id: 2 }]);
    expect(page.count).toBe(4);
    expect(page.status).toBe(206);
    const head = await clientFor(server).from("books").select("*", { count: "exact", head: true });
    expect(head.count).toBe(4);
    expect(head.data).toBeNull();
    const nulls = await clientFor(server)
      .from("books")
      .select("id")
      .order("year", { ascending: true, nullsFirst: true })
      .limit(1);
    expect(nulls.data).toEqual([{ id: 4 }]);
  });

  it("answers single objects, CSV and the Content-Range header", async () => {
    const one = await clientFor(server).from("authors").select("name").eq("id", 2).single();
    expect(one.data).toEqual({ name: "Italo" });
    const many = await clientFor(server).from("authors").select("name").single();
    expect(many.error?.code).toBe("PGRST116");
    expect(many.status).toBe(406);
    const csv = await clientFor(server).from("authors").select("id,name").order("id").csv();
    expect(csv.data).toBe("id,name\n1,Ursula\n2,Italo\n3,Nobody");
    const res = await rest(server, "/books?select=id&order=id&offset=1&limit=2");
    expect(res.headers.get("content-range")).toBe("1-2/*");
  });

  it("answers a repeated read by its own headers and by the schema as it is now", async () => {
    const url = "/authors?select=*&id=eq.2";
    // The same URL twice, once with a count and once as a single object: each answers its own headers.
    const counted = await rest(server, url, { headers: { prefer: "count=exact" } });
    expect(counted.headers.get("content-range")).toBe("0-0/1");
    const plain = await rest(server, url);
    expect(plain.headers.get("content-range")).toBe("0-0/*");
    const single = await rest(server, url, { headers: { accept: "application/vnd.pgrst.object+json" } });
    expect(await single.json()).toEqual({ id: 2, name: "Italo", profile: { country: "IT" } });
    // A column added since: the same URL's `*` has it (a schema change starts the kept reads over).
    await server.sql("alter table authors add column nickname text default 'none'");
    for (let i = 0; i < 50; i++) {
      const [row] = (await (await rest(server, url)).json()) as Record<string, unknown>[];
      if ("nickname" in row) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(await (await rest(server, url)).json()).toEqual([
      { id: 2, name: "Italo", profile: { country: "IT" }, nickname: "none" },
    ]);
  });

  it("serves the OpenAPI description of the exposed tables", async () => {
    const res = await rest(server, "/");
    expect(res.headers.get("content-type")).toMatch(/application\/openapi\+json/);
    const doc = (await res.json()) as any;
    expect(doc.swagger).toBe("2.0");
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(["/authors", "/books", "/loans"]));
    expect(doc.definitions.books.properties.author_id.description).toMatch(/Foreign Key to `authors.id`/);
  });
});
