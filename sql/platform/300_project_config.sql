-- Per-project configuration kept by the Management API.
alter table platform.clusters add column if not exists readonly_password text;

-- Secrets: values encrypted (AES-256-GCM) under a key derived from the project's root key.
create table if not exists platform.project_root_keys (
  project_ref text primary key references platform.projects (ref) on delete cascade,
  root_key text not null,
  updated_at timestamptz not null default now()
);

create table if not exists platform.project_secrets (
  project_ref text not null references platform.projects (ref) on delete cascade,
  name text not null,
  ciphertext text not null,
  value_digest text not null,
  updated_at timestamptz not null default now(),
  primary key (project_ref, name)
);
