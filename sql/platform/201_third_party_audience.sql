-- The audience a third-party integration's tokens must carry (`aud`), enforced with its issuer.
alter table platform.third_party_auth add column if not exists audience text;
