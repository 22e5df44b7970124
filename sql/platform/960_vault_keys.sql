-- Each project's vault key pair (src/modules/vault.ts): the public half is also in the project's database
-- (vault._strata_public_key), where vault.create_secret encrypts with it; the private half is kept here only,
-- sealed with the key-encryption key (re-sealed by `kek rotate`), and handed by Strata to its own sessions of
-- the project's owner, which decrypt vault.decrypted_secrets.
create table if not exists platform.vault_keys (
  project_ref text primary key references platform.projects (ref) on delete cascade,
  public_key text not null,
  private_key text not null,
  created_at timestamptz not null default now()
);
