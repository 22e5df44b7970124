import { useEffect, useState, type FormEvent } from "react";
import { Link, useNavigate, useParams } from "react-router";
import CodeMirror from "@uiw/react-codemirror";
import { mgmt } from "../api";
import type { Row } from "../components/DataGrid";
import { ErrorBox, PageHeader, Spinner } from "../components/Feedback";
import { FunctionLogs } from "../components/FunctionLogs";
import { ListPage } from "../components/ListPage";
import { useProjectApi } from "../projectApi";
import { useAsync } from "../useAsync";
import { useAction } from "../useAction";

interface DeployedFile {
  name: string;
  content: string;
}

/** A new function's first file: answers JSON, and the browser's preflight (so Studio's request builder can call it). */
const TEMPLATE = `const cors = {
  "Access-Control-Allow-Origin": "*",
  "Access-Control-Allow-Headers": "authorization, apikey, content-type",
};

Deno.serve(async (req) => {
  if (req.method === "OPTIONS") return new Response(null, { headers: cors });
  const body = req.method === "POST" ? await req.json().catch(() => ({})) : {};
  return Response.json({ hello: body.name ?? "world" }, { headers: cors });
});
`;

/** Deploys `files` as function `slug` through the Management API's multipart deploy. */
async function deploy(ref: string, slug: string, files: DeployedFile[], entrypoint: string) {
  const form = new FormData();
  form.append("metadata", JSON.stringify({ name: slug, entrypoint_path: entrypoint, verify_jwt: true }));
  for (const f of files)
    form.append("file", new File([f.content], f.name, { type: "application/typescript" }));
  return mgmt.post(`/v1/projects/${ref}/functions/deploy?slug=${encodeURIComponent(slug)}`, form);
}

/** Calls the function at the project's host with the project's key: method, path, body; the answer as it came. */
function Invoke({ projectRef: ref, slug }: { projectRef: string; slug: string }) {
  const api = useProjectApi(ref);
  const [method, setMethod] = useState("POST");
  const [body, setBody] = useState('{"name": "Studio"}');
  const [answer, setAnswer] = useState<{ status: number; ms: number; text: string }>();
  const [error, setError] = useState<Error>();
  async function send(e: FormEvent) {
    e.preventDefault();
    if (!api.data) return;
    setError(undefined);
    const started = performance.now();
    try {
      const res = await fetch(`${api.data.url}/functions/v1/${slug}`, {
        method,
        headers: {
          apikey: api.data.key,
          ...(api.data.key.startsWith("ey") ? { authorization: `Bearer ${api.data.key}` } : {}),
          ...(method === "GET" ? {} : { "content-type": "application/json" }),
        },
        body: method === "GET" ? undefined : body,
      });
      setAnswer({ status: res.status, ms: Math.round(performance.now() - started), text: await res.text() });
    } catch {
      setError(
        new Error(
          "The function did not answer the browser: it must answer CORS preflights (see the template)",
        ),
      );
    }
  }
  return (
    <form className="card" aria-label="Invoke" onSubmit={(e) => void send(e)}>
      <h2>Invoke</h2>
      <div className="form-row">
        <select aria-label="Method" value={method} onChange={(e) => setMethod(e.target.value)}>
          {["GET", "POST", "PUT", "PATCH", "DELETE"].map((m) => (
            <option key={m}>{m}</option>
          ))}
        </select>
        <input
          aria-label="Request body"
          className="mono"
          style={{ flex: 1 }}
          value={body}
          onChange={(e) => setBody(e.target.value)}
        />
        <button className="button primary" type="submit" disabled={!api.data}>
          Send
        </button>
      </div>
      <ErrorBox error={error ?? api.error} />
      {answer && (
        <div aria-label="Response">
          <div className="muted small">
            {answer.status} · {answer.ms} ms
          </div>
          <pre className="sql-preview">{answer.text}</pre>
        </div>
      )}
    </form>
  );
}

/** A function's tabs, at the platform's paths: `/functions/<slug>` (details) and `/functions/<slug>/logs`. */
function Tabs({ projectRef: ref, slug, logs }: { projectRef: string; slug: string; logs: boolean }) {
  const navigate = useNavigate();
  const base = `/project/${ref}/functions/${slug}`;
  return (
    <div className="tabs view-tabs" role="tablist">
      {(
        [
          ["Code and invoke", base, !logs],
          ["Logs", `${base}/logs`, logs],
        ] as const
      ).map(([label, to, active]) => (
        <button
          key={label}
          role="tab"
          aria-selected={active}
          className={`tab${active ? " active" : ""}`}
          onClick={() => navigate(to)}
        >
          {label}
        </button>
      ))}
    </div>
  );
}

/** One function: its code (edit and deploy a new version) and a request builder, or its logs. */
function FunctionDetail({
  projectRef: ref,
  slug,
  logs,
}: {
  projectRef: string;
  slug: string;
  logs: boolean;
}) {
  const fn = useAsync(() => mgmt.get<Row>(`/v1/projects/${ref}/functions/${slug}`), [ref, slug]);
  const body = useAsync(
    () => mgmt.get<DeployedFile[]>(`/v1/projects/${ref}/functions/${slug}/body`),
    [ref, slug],
  );
  const [files, setFiles] = useState<DeployedFile[]>();
  const [open, setOpen] = useState(0);
  const { busy, error, run } = useAction();
  useEffect(() => setFiles(body.data), [body.data]);

  async function redeploy() {
    if (!files) return;
    await run(async () => {
      await deploy(ref, slug, files, String(fn.data?.entrypoint_path ?? files[0].name));
      fn.reload();
    });
  }

  return (
    <div className="page">
      <PageHeader title={`Function ${slug}`}>
        {fn.data && <span className="muted small">version {String(fn.data.version)}</span>}
        <Link className="button ghost" to={`/project/${ref}/functions`}>
          All functions
        </Link>
        <button className="button primary" onClick={() => void redeploy()} disabled={busy || !files}>
          {busy ? "Deploying…" : "Deploy"}
        </button>
      </PageHeader>
      <Tabs projectRef={ref} slug={slug} logs={logs} />
      <ErrorBox error={fn.error ?? body.error ?? error} />
      {logs && <FunctionLogs projectRef={ref} slug={slug} />}
      {!logs && !files && <Spinner />}
      {!logs && files && (
        <div className="card section">
          <nav className="crumbs" aria-label="Files">
            {files.map((f, i) => (
              <button
                key={f.name}
                className={`button ${i === open ? "" : "ghost"}`}
                onClick={() => setOpen(i)}
              >
                {f.name}
              </button>
            ))}
          </nav>
          <CodeMirror
            aria-label="Function code"
            value={files[open]?.content ?? ""}
            height="320px"
            onChange={(content) => setFiles((fs) => fs?.map((f, i) => (i === open ? { ...f, content } : f)))}
          />
        </div>
      )}
      {!logs && (
        <section className="section">
          <Invoke projectRef={ref} slug={slug} />
        </section>
      )}
    </div>
  );
}

function NewFunction({ projectRef: ref, onDone }: { projectRef: string; onDone: (slug: string) => void }) {
  const [slug, setSlug] = useState("");
  const [error, setError] = useState<Error>();
  async function submit(e: FormEvent) {
    e.preventDefault();
    setError(undefined);
    try {
      await deploy(ref, slug, [{ name: "index.ts", content: TEMPLATE }], "index.ts");
      onDone(slug);
    } catch (err) {
      setError(err as Error);
    }
  }
  return (
    <form className="card form-row" aria-label="New function" onSubmit={(e) => void submit(e)}>
      <label className="field">
        <span>Slug</span>
        <input
          value={slug}
          onChange={(e) => setSlug(e.target.value)}
          pattern="[A-Za-z][A-Za-z0-9_-]*"
          required
        />
      </label>
      <button className="button primary" type="submit">
        Deploy from template
      </button>
      <ErrorBox error={error} />
    </form>
  );
}

export default function Functions() {
  const { ref, "*": rest } = useParams() as { ref: string; "*": string };
  const navigate = useNavigate();
  const [adding, setAdding] = useState(false);
  const functions = useAsync(() => mgmt.get<Row[]>(`/v1/projects/${ref}/functions`), [ref]);
  const [slug, tab] = (rest ?? "").split("/");
  if (slug) return <FunctionDetail key={slug} projectRef={ref} slug={slug} logs={tab === "logs"} />;
  return (
    <ListPage
      title="Edge functions"
      list={functions}
      columns={["slug", "name", "status", "version", "verify_jwt", "updated_at"]}
      empty="No functions deployed yet."
      onRowClick={(row) => navigate(`/project/${ref}/functions/${String(row.slug)}`)}
      actions={
        <button className="button primary" onClick={() => setAdding((a) => !a)}>
          {adding ? "Close" : "New function"}
        </button>
      }
    >
      {adding && <NewFunction projectRef={ref} onDone={(s) => navigate(`/project/${ref}/functions/${s}`)} />}
    </ListPage>
  );
}
