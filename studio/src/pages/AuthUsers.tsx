import { useState, type FormEvent } from "react";
import { useParams } from "react-router";
import type { Row } from "../components/DataGrid";
import { ErrorBox } from "../components/Feedback";
import { ListPage } from "../components/ListPage";
import { PasswordFields } from "../components/PasswordFields";
import { isBanned, UserBan } from "../components/UserBan";
import { useProjectApi, type ProjectApi } from "../projectApi";
import { useAsync } from "../useAsync";
import { useAction } from "../useAction";

/** Create a user (confirmed at once) or invite one by email (the project's mailer sends the link). */
function NewUser({ api, onDone }: { api: ProjectApi; onDone: () => void }) {
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const { busy, error, run } = useAction();

  async function submit(e: FormEvent, invite: boolean) {
    e.preventDefault();
    await run(async () => {
      if (invite) await api.call("/auth/v1/invite", { method: "POST", body: { email } });
      else
        await api.call("/auth/v1/admin/users", {
          method: "POST",
          body: { email, password, email_confirm: true },
        });
      setEmail("");
      setPassword("");
      onDone();
    });
  }

  return (
    <form className="card form-row" aria-label="New user" onSubmit={(e) => void submit(e, false)}>
      <PasswordFields
        purpose="new-user"
        account={{ field: "email", value: email, onChange: setEmail }}
        password={password}
        onPassword={setPassword}
      />
      <button className="button primary" type="submit" disabled={busy || !password}>
        Create user
      </button>
      <button
        className="button"
        type="button"
        disabled={busy || !email}
        onClick={(e) => void submit(e, true)}
      >
        Send invitation
      </button>
      <ErrorBox error={error} />
    </form>
  );
}

/** The project's users, through its auth server's admin API (the project's own key). */
export default function AuthUsers() {
  const { ref } = useParams() as { ref: string };
  const api = useProjectApi(ref);
  const [search, setSearch] = useState("");
  const [adding, setAdding] = useState(false);
  const [selected, setSelected] = useState<{ row: Row; index: number }>();
  const [error, setError] = useState<Error>();
  const users = useAsync(async () => {
    if (!api.data) return undefined as unknown as Row[];
    const { data } = await api.data.call<{ users: Row[] }>("/auth/v1/admin/users?page=1&per_page=200");
    return data.users.map((u): Row => ({
      ...u,
      provider: (u.app_metadata as { provider?: string } | null)?.provider,
      banned: isBanned(u) ? `until ${new Date(String(u.banned_until)).toLocaleString()}` : null,
    }));
  }, [api.data]);
  const needle = search.trim().toLowerCase();
  const shown = needle
    ? users.data?.filter((u) => `${u.email ?? ""} ${u.phone ?? ""} ${u.id}`.toLowerCase().includes(needle))
    : users.data;
  // The selected user as the latest list shows it (a ban changes the row).
  const current = selected && (users.data?.find((u) => u.id === selected.row.id) ?? selected.row);

  async function remove(user: Row) {
    if (!api.data || !window.confirm(`Delete the user ${String(user.email ?? user.id)}?`)) return;
    setError(undefined);
    try {
      await api.data.call(`/auth/v1/admin/users/${String(user.id)}`, { method: "DELETE" });
      setSelected(undefined);
      users.reload();
    } catch (e) {
      setError(e as Error);
    }
  }

  return (
    <ListPage
      title="Users"
      list={{ ...users, data: shown, error: users.error ?? api.error }}
      columns={["id", "email", "phone", "provider", "banned", "created_at", "last_sign_in_at"]}
      empty="No users yet."
      onRowClick={(row, index) => setSelected({ row, index })}
      selectedIndex={selected?.index}
      actions={
        <>
          <input
            type="search"
            aria-label="Search users"
            placeholder="Search by email, phone or id"
            value={search}
            onChange={(e) => setSearch(e.target.value)}
          />
          <button className="button primary" onClick={() => setAdding((a) => !a)}>
            {adding ? "Close" : "Add user"}
          </button>
        </>
      }
    >
      {adding && api.data && (
        <NewUser
          api={api.data}
          onDone={() => {
            setAdding(false);
            users.reload();
          }}
        />
      )}
      {current && api.data && (
        <div className="card form-row" aria-label="Selected user">
          <span>{String(current.email ?? current.id)}</span>
          <UserBan api={api.data} user={current} onDone={users.reload} />
          <button className="button danger" onClick={() => void remove(current)}>
            Delete user
          </button>
          <button className="button ghost" onClick={() => setSelected(undefined)}>
            Close
          </button>
        </div>
      )}
      <ErrorBox error={error} />
    </ListPage>
  );
}
