import { useState } from "react";
import type { ProjectApi } from "../projectApi";
import type { Row } from "./DataGrid";
import { ErrorBox } from "./Feedback";
import { useAction } from "../useAction";

/** Ban lengths as the auth admin API takes them (Go durations); "forever" is the platform's hundred years. */
const DURATIONS: [label: string, duration: string][] = [
  ["1 hour", "1h"],
  ["24 hours", "24h"],
  ["7 days", "168h"],
  ["30 days", "720h"],
  ["Forever", "876000h"],
];

/** Whether `user` is banned now (its `banned_until` lies ahead). */
export function isBanned(user: Row): boolean {
  return typeof user.banned_until === "string" && Date.parse(user.banned_until) > Date.now();
}

/** Bans a user for a chosen time or lifts the ban, through `PUT /auth/v1/admin/users/{id}` (`ban_duration`). */
export function UserBan({ api, user, onDone }: { api: ProjectApi; user: Row; onDone: () => void }) {
  const [duration, setDuration] = useState(DURATIONS[1][1]);
  const { busy, error, run } = useAction();
  const banned = isBanned(user);

  async function setBan(banDuration: string) {
    await run(async () => {
      await api.call(`/auth/v1/admin/users/${String(user.id)}`, {
        method: "PUT",
        body: { ban_duration: banDuration },
      });
      onDone();
    });
  }

  return (
    <>
      {banned ? (
        <>
          <span className="badge">Banned until {new Date(String(user.banned_until)).toLocaleString()}</span>
          <button className="button" disabled={busy} onClick={() => void setBan("none")}>
            Unban user
          </button>
        </>
      ) : (
        <>
          <select aria-label="Ban duration" value={duration} onChange={(e) => setDuration(e.target.value)}>
            {DURATIONS.map(([label, value]) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
          <button className="button danger" disabled={busy} onClick={() => void setBan(duration)}>
            Ban user
          </button>
        </>
      )}
      <ErrorBox error={error} />
    </>
  );
}
