import { useState, type FormEvent } from "react";
import { Link, useNavigate, useParams, useSearchParams } from "react-router";
import type { Row } from "../components/DataGrid";
import { ErrorBox } from "../components/Feedback";
import { ListPage } from "../components/ListPage";
import { ObjectTransfer } from "../components/ObjectTransfer";
import { useProjectApi, type ProjectApi } from "../projectApi";
import { uploadResumably, uploadTuning, type ResumableUpload } from "../resumableUpload";
import { useAsync } from "../useAsync";

const SIGNED_URL_SECONDS = 3600;

/** Uploads `file` to `bucket/path` with XMLHttpRequest, which reports upload progress (fetch does not). */
function upload(
  api: ProjectApi,
  bucket: string,
  path: string,
  file: File,
  onProgress: (percent: number) => void,
) {
  return new Promise<void>((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open(
      "POST",
      `${api.url}/storage/v1/object/${encodeURIComponent(bucket)}/${path.split("/").map(encodeURIComponent).join("/")}`,
    );
    xhr.setRequestHeader("apikey", api.key);
    if (api.key.startsWith("ey")) xhr.setRequestHeader("authorization", `Bearer ${api.key}`);
    xhr.setRequestHeader("content-type", file.type || "application/octet-stream");
    xhr.setRequestHeader("x-upsert", "true");
    xhr.upload.onprogress = (e) => e.lengthComputable && onProgress(Math.round((e.loaded / e.total) * 100));
    xhr.onload = () => {
      if (xhr.status < 300) return resolve();
      let message = `Upload failed with status ${xhr.status}`;
      try {
        message = (JSON.parse(xhr.responseText) as { message?: string }).message ?? message;
      } catch {
        // not JSON: the status says it
      }
      reject(new Error(message));
    };
    xhr.onerror = () => reject(new Error("Upload failed: the storage API did not answer"));
    xhr.send(file);
  });
}

/** How many of a bucket's top-level files and folders its row names. */
const FIRST_FILES = 5;

/** The buckets, each with the first names at its top level (one list call per bucket, in parallel). */
async function withFirstFiles(api: ProjectApi): Promise<Row[]> {
  const { data: buckets } = await api.call<Row[]>("/storage/v1/bucket");
  return Promise.all(
    buckets.map(async (bucket) => {
      const { data } = await api.call<Row[]>(
        `/storage/v1/object/list/${encodeURIComponent(String(bucket.name))}`,
        {
          method: "POST",
          body: { prefix: "", limit: FIRST_FILES + 1, offset: 0, sortBy: { column: "name", order: "asc" } },
        },
      );
      const names = data
        .slice(0, FIRST_FILES)
        .map((o) => (o.id === null ? `${String(o.name)}/` : String(o.name)));
      return { ...bucket, files: names.join(", ") + (data.length > FIRST_FILES ? ", …" : "") };
    }),
  );
}

function NewBucket({ api, onDone }: { api: ProjectApi; onDone: () => void }) {
  const [name, setName] = useState("");
  const [isPublic, setPublic] = useState(false);
  const [limit, setLimit] = useState("");
  const [error, setError] = useState<Error>();
  async function submit(e: FormEvent) {
    e.preventDefault();
    setError(undefined);
    try {
      await api.call("/storage/v1/bucket", {
        method: "POST",
        body: { name, public: isPublic, ...(limit ? { file_size_limit: limit } : {}) },
      });
      onDone();
    } catch (err) {
      setError(err as Error);
    }
  }
  return (
    <form className="card form-row" aria-label="New bucket" onSubmit={(e) => void submit(e)}>
      <label className="field">
        <span>Name</span>
        <input value={name} onChange={(e) => setName(e.target.value)} required />
      </label>
      <label className="field">
        <span>File size limit</span>
        <input placeholder="e.g. 50MB" value={limit} onChange={(e) => setLimit(e.target.value)} />
      </label>
      <span className="checkbox">
        <input type="checkbox" checked={isPublic} onChange={(e) => setPublic(e.target.checked)} /> Public
      </span>
      <button className="button primary" type="submit">
        Create bucket
      </button>
      <ErrorBox error={error} />
    </form>
  );
}

/** One bucket's folder: its files and folders, upload with progress, preview, signed URL, move, copy, delete. */
function BucketFolder({
  api,
  bucket,
  isPublic,
  buckets,
}: {
  api: ProjectApi;
  bucket: string;
  isPublic: boolean;
  buckets: string[];
}) {
  const { ref } = useParams() as { ref: string };
  const [params, setParams] = useSearchParams();
  const prefix = params.get("prefix") ?? "";
  const [progress, setProgress] = useState<number>();
  const [resumable, setResumable] = useState<{
    upload: ResumableUpload;
    paused: boolean;
    resumed: boolean;
  }>();
  const [selected, setSelected] = useState<{ row: Row; index: number }>();
  const [preview, setPreview] = useState<{ url: string; type: string }>();
  const [error, setError] = useState<Error>();
  const objects = useAsync(async () => {
    const { data } = await api.call<Row[]>(`/storage/v1/object/list/${encodeURIComponent(bucket)}`, {
      method: "POST",
      body: { prefix, limit: 1000, offset: 0, sortBy: { column: "name", order: "asc" } },
    });
    return data.map((o) => ({
      ...o,
      kind: o.id === null ? "folder" : "file",
      size: (o.metadata as { size?: number } | null)?.size ?? null,
      type: (o.metadata as { mimetype?: string } | null)?.mimetype ?? null,
    }));
  }, [api, bucket, prefix]);

  const pathOf = (row: Row) => `${prefix}${String(row.name)}`;
  const encodedPath = (path: string) => path.split("/").map(encodeURIComponent).join("/");

  async function urlOf(path: string): Promise<string> {
    if (isPublic)
      return `${api.url}/storage/v1/object/public/${encodeURIComponent(bucket)}/${encodedPath(path)}`;
    const { data } = await api.call<{ signedURL: string }>(
      `/storage/v1/object/sign/${encodeURIComponent(bucket)}/${encodedPath(path)}`,
      {
        method: "POST",
        body: { expiresIn: SIGNED_URL_SECONDS },
      },
    );
    return `${api.url}/storage/v1${data.signedURL}`;
  }

  async function open(row: Row, index: number) {
    if (row.kind === "folder") {
      setParams({ prefix: `${pathOf(row)}/` });
      return;
    }
    setSelected({ row, index });
    setPreview(undefined);
    setError(undefined);
    try {
      setPreview({ url: await urlOf(pathOf(row)), type: String(row.type ?? "") });
    } catch (e) {
      setError(e as Error);
    }
  }

  async function send(files: FileList | null) {
    if (!files?.length) return;
    setError(undefined);
    try {
      for (const file of Array.from(files)) {
        setProgress(0);
        const path = `${prefix}${file.name}`;
        if (file.size > uploadTuning().resumableAboveBytes) await sendResumably(path, file);
        else await upload(api, bucket, path, file, setProgress);
      }
      objects.reload();
    } catch (e) {
      setError(e as Error);
    } finally {
      setProgress(undefined);
      setResumable(undefined);
    }
  }

  /** A large file, through the resumable endpoint: pause and resume while it goes. */
  async function sendResumably(path: string, file: File) {
    const transfer = uploadResumably(api, { bucket, path }, file, {
      onProgress: (sent, total) => setProgress(Math.floor((sent / total) * 100)),
      onResumed: () => setResumable((r) => r && { ...r, resumed: true }),
    });
    setResumable({ upload: transfer, paused: false, resumed: false });
    await transfer.done;
  }

  function pauseOrResume() {
    if (!resumable) return;
    if (resumable.paused) resumable.upload.resume();
    else resumable.upload.pause();
    setResumable({ ...resumable, paused: !resumable.paused });
  }

  async function remove(row: Row) {
    if (!window.confirm(`Delete ${pathOf(row)}?`)) return;
    try {
      await api.call(`/storage/v1/object/${encodeURIComponent(bucket)}`, {
        method: "DELETE",
        body: { prefixes: [pathOf(row)] },
      });
      setSelected(undefined);
      setPreview(undefined);
      objects.reload();
    } catch (e) {
      setError(e as Error);
    }
  }

  const crumbs = prefix.split("/").filter(Boolean);
  return (
    <ListPage
      title={`Bucket ${bucket}`}
      list={objects}
      columns={["name", "kind", "size", "type", "updated_at"]}
      empty="This folder is empty: upload a file."
      onRowClick={(row, index) => void open(row, index)}
      selectedIndex={selected?.index}
      actions={
        <>
          <Link className="button ghost" to={`/project/${ref}/storage/buckets`}>
            All buckets
          </Link>
          <label className="button primary">
            Upload files
            <input
              type="file"
              multiple
              hidden
              aria-label="Upload files"
              onChange={(e) => void send(e.target.files)}
            />
          </label>
        </>
      }
    >
      <nav className="crumbs" aria-label="Folder">
        <button className="button ghost" onClick={() => setParams({})}>
          {bucket}
        </button>
        {crumbs.map((c, i) => (
          <button
            key={i}
            className="button ghost"
            onClick={() => setParams({ prefix: `${crumbs.slice(0, i + 1).join("/")}/` })}
          >
            / {c}
          </button>
        ))}
      </nav>
      {progress !== undefined && (
        <div className="upload-progress">
          <progress aria-label="Upload progress" max={100} value={progress} /> {progress}%
          {resumable && (
            <>
              <button className="button" onClick={pauseOrResume}>
                {resumable.paused ? "Resume upload" : "Pause upload"}
              </button>
              <span className="muted small" role="note">
                {resumable.resumed ? "Resumed an earlier upload of this file" : "Resumable upload"}
              </span>
            </>
          )}
        </div>
      )}
      <ErrorBox error={error} />
      {selected && (
        <div className="card preview" aria-label="Preview">
          <div className="panel-head">
            <strong>{pathOf(selected.row)}</strong>
            <div className="page-actions">
              {preview && (
                <>
                  <a className="button" href={preview.url} download>
                    Download
                  </a>
                  <button className="button" onClick={() => void navigator.clipboard?.writeText(preview.url)}>
                    Copy URL
                  </button>
                </>
              )}
              <button className="button danger" onClick={() => void remove(selected.row)}>
                Delete
              </button>
            </div>
          </div>
          {preview?.type.startsWith("image/") && (
            <img className="preview-image" src={preview.url} alt={String(selected.row.name)} />
          )}
          {preview && !preview.type.startsWith("image/") && (
            <div className="muted small mono">{preview.url}</div>
          )}
          <ObjectTransfer
            key={pathOf(selected.row)}
            api={api}
            bucket={bucket}
            path={pathOf(selected.row)}
            buckets={buckets}
            onDone={(how) => {
              // A moved object is gone from here; a copy leaves the original selected.
              if (how === "move") {
                setSelected(undefined);
                setPreview(undefined);
              }
              objects.reload();
            }}
          />
        </div>
      )}
    </ListPage>
  );
}

/** The project's storage buckets, through its storage API (the project's own key); a bucket opens its files. */
export default function StorageBuckets() {
  const { ref, "*": rest } = useParams() as { ref: string; "*": string };
  const api = useProjectApi(ref);
  const navigate = useNavigate();
  const [adding, setAdding] = useState(false);
  const buckets = useAsync(
    async () => (api.data ? withFirstFiles(api.data) : (undefined as unknown as Row[])),
    [api.data],
  );
  const bucket = rest ? decodeURIComponent(rest.replace(/\/$/, "")) : undefined;
  if (bucket && api.data && buckets.data) {
    const found = buckets.data.find((b) => b.name === bucket);
    return (
      <BucketFolder
        api={api.data}
        bucket={bucket}
        isPublic={Boolean(found?.public)}
        buckets={buckets.data.map((b) => String(b.name))}
      />
    );
  }
  return (
    <ListPage
      title="Storage buckets"
      list={{ ...buckets, error: buckets.error ?? api.error }}
      columns={["name", "public", "files", "file_size_limit", "allowed_mime_types", "created_at"]}
      empty="No buckets yet."
      onRowClick={(row) =>
        navigate(`/project/${ref}/storage/buckets/${encodeURIComponent(String(row.name))}`)
      }
      actions={
        <button className="button primary" onClick={() => setAdding((a) => !a)}>
          {adding ? "Close" : "New bucket"}
        </button>
      }
    >
      {adding && api.data && (
        <NewBucket
          api={api.data}
          onDone={() => {
            setAdding(false);
            buckets.reload();
          }}
        />
      )}
    </ListPage>
  );
}
