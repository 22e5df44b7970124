-- External sign-ins link by address (automatic linking): identities are looked up by their email, as the
-- platform's auth server indexes them.
create index if not exists identities_email_idx on auth.identities (email text_pattern_ops);
