import { useState, type FormEvent } from "react";
import type { ProjectApi } from "../projectApi";
import { ErrorBox } from "./Feedback";
import { useAction } from "../useAction";

/**
 * Moves (renames) or copies one object to a path of its bucket or of another, through the storage API's
 * `POST /storage/v1/object/move` and `/object/copy`; a refusal shows the API's own message.
 */
export function ObjectTransfer({
  api,
  bucket,
  path,
  buckets,
  onDone,
}: {
  api: ProjectApi;
  bucket: string;
  path: string;
  buckets: string[];
  onDone: (how: "move" | "copy") => void;
}) {
  const [toBucket, setToBucket] = useState(bucket);
  const [toPath, setToPath] = useState(path);
  const [copied, setCopied] = useState<string>();
  const { busy, error, run } = useAction();
  const unchanged = toBucket === bucket && toPath === path;

  async function transfer(e: FormEvent, how: "move" | "copy") {
    e.preventDefault();
    setCopied(undefined);
    await run(async () => {
      await api.call(`/storage/v1/object/${how}`, {
        method: "POST",
        body: { bucketId: bucket, sourceKey: path, destinationBucket: toBucket, destinationKey: toPath },
      });
      if (how === "copy") setCopied(`${toBucket}/${toPath}`);
      onDone(how);
    });
  }

  return (
    <form className="form-row" aria-label="Move or copy" onSubmit={(e) => void transfer(e, "move")}>
      <select aria-label="Destination bucket" value={toBucket} onChange={(e) => setToBucket(e.target.value)}>
        {buckets.map((b) => (
          <option key={b}>{b}</option>
        ))}
      </select>
      <input
        aria-label="Destination path"
        className="mono"
        style={{ flex: 1 }}
        value={toPath}
        onChange={(e) => setToPath(e.target.value)}
        required
      />
      <button className="button" type="submit" disabled={busy || unchanged}>
        Move
      </button>
      <button
        className="button"
        type="button"
        disabled={busy || unchanged}
        onClick={(e) => void transfer(e, "copy")}
      >
        Copy
      </button>
      {copied && (
        <span className="muted small" role="note">
          Copied to {copied}
        </span>
      )}
      <ErrorBox error={error} />
    </form>
  );
}
