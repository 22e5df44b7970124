// The benchmark's floor: what a careful hand-written server does per request, as a process of its own.
// node:http + pg; the API key checked and the bearer JWT verified (HS256), the role taken from its claims,
// then ONE simple-protocol Query message: `select set_config('role', …, true), set_config('request.jwt.claims',
// …, true); <the shape's statement>`. A multi-statement Query runs as one implicit transaction, so the role
// is in force when the statement is planned (grants and RLS apply) and the settings end with it.
//
//   node bench/floor.mjs <port> <database url> <jwt secret> <shapes.json>
// shapes.json: [{method, path, body, status, sql}]; a request is answered by the shape with the same method,
// path and body, with the first column of the statement's first row as its body. Prints "listening" when up.
import { createHmac, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import http from "node:http";
import pg from "pg";

const [port, url, secret, shapesFile] = process.argv.slice(2);
const shapes = new Map(
  JSON.parse(readFileSync(shapesFile, "utf8")).map((s) => [`${s.method} ${s.path} ${s.body ?? ""}`, s]),
);
const pool = new pg.Pool({ connectionString: url, max: 10 });

/** The claims of an HS256 JWT signed with the secret and not expired, or undefined. */
function verify(token) {
  const [header, payload, signature] = token.split(".");
  if (!signature) return undefined;
  const expected = createHmac("sha256", secret).update(`${header}.${payload}`).digest();
  const given = Buffer.from(signature, "base64url");
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  const claims = JSON.parse(Buffer.from(payload, "base64url").toString());
  if (typeof claims.exp === "number" && claims.exp < Date.now() / 1000) return undefined;
  return claims;
}

function answer(res, status, body) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(body);
}

http
  .createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      const shape = shapes.get(`${req.method} ${req.url} ${Buffer.concat(chunks).toString()}`);
      if (!shape) return answer(res, 404, '{"message":"no such shape"}');
      const bearer = /^Bearer (.+)$/i.exec(req.headers.authorization ?? "")?.[1];
      const claims = verify(bearer ?? String(req.headers.apikey ?? ""));
      if (!claims || typeof claims.role !== "string") return answer(res, 401, '{"message":"invalid JWT"}');
      try {
        const role = pg.escapeLiteral(claims.role);
        const results = await pool.query(
          `select set_config('role', ${role}, true), set_config('request.jwt.claims', ${pg.escapeLiteral(JSON.stringify(claims))}, true); ${shape.sql}`,
        );
        const row = results[1].rows[0];
        answer(res, shape.status, row ? String(Object.values(row)[0]) : "");
      } catch (e) {
        answer(res, 500, JSON.stringify({ message: e.message }));
      }
    });
  })
  .listen(Number(port), "127.0.0.1", () => console.log("listening"));
