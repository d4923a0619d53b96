-- The open-session cap's count under the tenant's lock, for the session create's one statement
-- (src/db/pg/session-create.ts): the tenant's creates take turns on the transaction advisory lock
-- (lock_class, hashtext(tenant)) until their transaction ends, and the count, a statement of its
-- own in a VOLATILE function, runs on a snapshot taken after the lock was granted, so it sees every
-- create that held the lock before. In the calling statement's own snapshot, taken before the wait,
-- those creates would be missing.
CREATE OR REPLACE FUNCTION lamer_open_sessions_locked(lock_class integer, for_tenant text) RETURNS integer
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  n integer;
BEGIN
  PERFORM pg_advisory_xact_lock(lock_class, hashtext(for_tenant));
  SELECT count(*) INTO n FROM sessions WHERE tenant = for_tenant AND status = 'active';
  RETURN n;
END
$$;
