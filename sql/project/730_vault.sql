-- vault: supabase_vault's SQL interface (vault.secrets, vault.decrypted_secrets, vault.create_secret,
-- vault.update_secret) without its C extension. A secret is stored encrypted with the project's public key
-- (pgcrypto's OpenPGP public-key encryption, AES-256 for the data, bound to the secret's id); the private key is
-- not in the database: Strata keeps it sealed in the control plane and loads it into the sessions it opens (the
-- Management API's SQL and migrations, cron jobs; since 765, the data API's; the owner's through the database
-- listener, src/pooler/vaultSession.ts), into a temporary table of the session that only strata_vault may read
-- (src/modules/vault.ts). So create_secret works in any session, and decrypted_secrets decrypts only in those,
-- for the roles granted it: anywhere else (a direct connection to the cluster) it raises. Privileges are the platform's: the owner (_strata.grant_modules) and service_role may read, delete,
-- create and update secrets; anon and authenticated have nothing.

create or replace function _strata.install_vault() returns void
language plpgsql set search_path = pg_catalog, pg_temp as $install$
declare
  pgcrypto_schema name := (select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace
                            where e.extname = 'pgcrypto');
begin
  create schema if not exists vault;
  revoke all on schema vault from public;

  create table if not exists vault.secrets (
    id uuid primary key default gen_random_uuid(),
    name text,
    description text not null default '',
    secret text not null,
    key_id uuid,
    nonce bytea,
    created_at timestamptz not null default current_timestamp,
    updated_at timestamptz not null default current_timestamp
  );
  comment on table vault.secrets is 'Table with encrypted `secret` column for storing sensitive information on disk.';
  create unique index if not exists secrets_name_idx on vault.secrets (name) where name is not null;

  -- The project's public key (an OpenPGP RSA subkey), written by Strata when it first opens the project.
  create table if not exists vault._strata_public_key (
    singleton boolean primary key default true check (singleton),
    key bytea not null
  );

  -- pgcrypto's functions, bound when these are made (BEGIN ATOMIC): a function of the same name made later, in a
  -- schema of the same name, cannot stand in for them.
  execute format($f$
    create or replace function vault._pgp_encrypt(plain text, key bytea) returns bytea
    language sql immutable strict set search_path = pg_catalog, pg_temp
    begin atomic
      select %1$I.pgp_pub_encrypt(plain, key, 'cipher-algo=aes256, compress-algo=0');
    end$f$, pgcrypto_schema);
  execute format($f$
    create or replace function vault._pgp_decrypt(message bytea, key bytea) returns text
    language sql immutable strict set search_path = pg_catalog, pg_temp
    begin atomic
      select %1$I.pgp_pub_decrypt(message, key);
    end$f$, pgcrypto_schema);

  -- The private key this session was given by Strata, from the temporary table only strata_vault may read.
  create or replace function vault._session_key() returns bytea
  language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
  declare
    keys bytea[];
  begin
    if not exists (select from pg_class c
                    where c.relnamespace = pg_my_temp_schema() and c.relname = 'strata_vault_session'
                      and c.relkind = 'r' and c.relowner = 'strata_vault'::regrole) then
      raise exception 'vault: this session cannot decrypt secrets' using errcode = '42501',
        hint = 'Strata decrypts vault.decrypted_secrets in the sessions it opens: the SQL editor and database/query, migrations, cron jobs, the data API''s, and the owner''s through the database listener.';
    end if;
    execute 'select array_agg(key) from pg_temp.strata_vault_session' into keys;
    if cardinality(keys) is distinct from 1 then
      raise exception 'vault: this session''s key was not loaded' using errcode = '42501';
    end if;
    return keys[1];
  end
  $$;

  create or replace function vault._encrypt(plain text, id uuid) returns text
  language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
  declare
    public_key bytea := (select k.key from vault._strata_public_key k);
  begin
    if public_key is null then
      raise exception 'vault: this project''s key is not made yet' using errcode = '55000',
        hint = 'Strata makes it when it opens the project; try again in a few seconds.';
    end if;
    return encode(vault._pgp_encrypt(id::text || ':' || plain, public_key), 'base64');
  end
  $$;

  create or replace function vault._decrypt(secret text, id uuid) returns text
  language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
  declare
    plain text;
  begin
    if secret is null then
      return null;
    end if;
    plain := vault._pgp_decrypt(decode(secret, 'base64'), vault._session_key());
    if split_part(plain, ':', 1) is distinct from id::text then
      raise exception 'vault: secret % was encrypted for another row', id;
    end if;
    return substr(plain, length(id::text) + 2);
  end
  $$;

  create or replace view vault.decrypted_secrets as
  select s.id, s.name, s.description, s.secret, vault._decrypt(s.secret, s.id) as decrypted_secret, s.key_id,
         s.nonce, s.created_at, s.updated_at
    from vault.secrets s;

  create or replace function vault.create_secret(new_secret text, new_name text = null, new_description text = '',
    new_key_id uuid = null) returns uuid
  language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
  declare
    id uuid := gen_random_uuid();
  begin
    insert into vault.secrets (id, secret, name, description) values (id, vault._encrypt(new_secret, id), new_name,
      new_description);
    return id;
  end
  $$;

  create or replace function vault.update_secret(secret_id uuid, new_secret text = null, new_name text = null,
    new_description text = null, new_key_id uuid = null) returns void
  language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
  begin
    update vault.secrets s
       set secret = case when new_secret is null then s.secret else vault._encrypt(new_secret, s.id) end,
           name = coalesce(new_name, s.name),
           description = coalesce(new_description, s.description),
           updated_at = now()
     where s.id = secret_id;
  end
  $$;

  -- Strata's sessions of the owner: a temporary table of the session owned by strata_vault, which the session's
  -- login may fill once (COPY, never logged) before _strata_session_seal takes that right back.
  create or replace function vault._strata_session_open() returns void
  language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
  begin
    drop table if exists pg_temp.strata_vault_session;
    create temporary table strata_vault_session (key bytea not null);
    execute format('grant insert on table pg_temp.strata_vault_session to %I', session_user);
  end
  $$;

  create or replace function vault._strata_session_seal() returns void
  language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
  begin
    execute format('revoke all on table pg_temp.strata_vault_session from %I', session_user);
    perform vault._session_key();
  end
  $$;

  alter function vault._session_key() owner to strata_vault;
  alter function vault._encrypt(text, uuid) owner to strata_vault;
  alter function vault._decrypt(text, uuid) owner to strata_vault;
  alter function vault.create_secret(text, text, text, uuid) owner to strata_vault;
  alter function vault.update_secret(uuid, text, text, text, uuid) owner to strata_vault;
  alter function vault._strata_session_open() owner to strata_vault;
  alter function vault._strata_session_seal() owner to strata_vault;
  alter view vault.decrypted_secrets owner to strata_vault;

  revoke all on all functions in schema vault from public;
  revoke all on all tables in schema vault from public;
  grant usage on schema vault to strata_vault;
  grant select, insert, update, delete on vault.secrets to strata_vault;
  grant select on vault._strata_public_key to strata_vault;
  grant execute on function vault._pgp_encrypt(text, bytea), vault._pgp_decrypt(bytea, bytea) to strata_vault;
  execute format('grant temporary on database %I to strata_vault', current_database());

  -- The platform's grants, for service_role here (the owner's: _strata.grant_modules).
  grant usage on schema vault to service_role;
  grant select, delete on vault.secrets, vault.decrypted_secrets to service_role;
  grant execute on function vault.create_secret(text, text, text, uuid), vault.update_secret(uuid, text, text, text, uuid),
    vault._decrypt(text, uuid) to service_role;
end
$install$;
revoke all on function _strata.install_vault() from public;

do $$
begin
  if exists (select from pg_extension where extname = 'pgcrypto') then
    perform _strata.install_vault();
  end if;
end
$$;
