import { useState } from "react";
import { useParams } from "react-router";
import type { Row } from "../components/DataGrid";
import { ListPage } from "../components/ListPage";
import { useProjectApi } from "../projectApi";
import { useAsync } from "../useAsync";

/** The project's users, through its auth server's admin API (the project's own key). */
export default function AuthUsers() {
  const { ref } = useParams() as { ref: string };
  const api = useProjectApi(ref);
  const [search, setSearch] = useState("");
  const users = useAsync(async () => {
    if (!api.data) return undefined as unknown as Row[];
    const { data } = await api.data.call<{ users: Row[] }>("/auth/v1/admin/users?page=1&per_page=200");
    return data.users.map((u) => ({
      ...u,
      provider: (u.app_metadata as { provider?: string } | null)?.provider,
    }));
  }, [api.data]);
  const needle = search.trim().toLowerCase();
  const shown = needle
    ? users.data?.filter((u) => `${u.email ?? ""} ${u.phone ?? ""} ${u.id}`.toLowerCase().includes(needle))
    : users.data;
  return (
    <ListPage
      title="Users"
      list={{ ...users, data: shown, error: users.error ?? api.error }}
      columns={["id", "email", "phone", "provider", "created_at", "last_sign_in_at"]}
      empty="No users yet."
      actions={
        <input
          type="search"
          aria-label="Search users"
          placeholder="Search by email, phone or id"
          value={search}
          onChange={(e) => setSearch(e.target.value)}
        />
      }
    />
  );
}
