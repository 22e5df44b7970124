-- SAML replay protection: the ID of each SAML response and assertion taken at the ACS, kept until its
-- NotOnOrAfter so that an answer (above all one the identity provider starts, which names no request of
-- ours) is taken once, on whichever node receives it. Rows past their expiry are swept on each use.
create table if not exists platform.saml_consumed_ids (
  project_ref text not null references platform.projects (ref) on delete cascade,
  -- 'response' or 'assertion': the two share no namespace.
  kind text not null check (kind in ('response', 'assertion')),
  id text not null,
  expires_at timestamptz not null,
  created_at timestamptz not null default now(),
  primary key (project_ref, kind, id)
);

create index if not exists saml_consumed_ids_expiry on platform.saml_consumed_ids (expires_at);
