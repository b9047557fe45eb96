-- The fence (SYSTEM.md §5, invariant 5) as one named function, so that
-- every fenced statement calls it with its first four parameters instead of
-- carrying its own copy of the predicate at computed parameter numbers.
--
-- True only while p_owner_node holds the lease of (p_chain_id, p_signer)
-- with token p_fencing_token, unexpired by the database clock: now(), the
-- calling transaction's start. It locks the lease row FOR KEY SHARE, and
-- the lock is the calling transaction's, held until it ends: a takeover
-- (FOR UPDATE) waits for every fenced transaction in flight, and a fenced
-- statement that waits on a takeover re-reads the new row and gets false.
--
-- Statements write it as a scalar sub-select,
-- (SELECT txfence_holds_lease($1, $2, $3, $4)), which runs once per
-- statement, before any row is read (an InitPlan gating the plan, as the
-- EXISTS sub-select it replaces did); a bare call would run once per row.
--
-- PL/pgSQL rather than SQL: a SQL function whose body has a sub-select and
-- a row lock is never inlined, and PostgreSQL (before 18) plans a SQL
-- function that is not inlined anew for every statement that calls it,
-- where PL/pgSQL keeps its plan for the session. VOLATILE (the default), since it locks: a STABLE function may
-- not take row locks.
CREATE FUNCTION txfence_holds_lease(p_chain_id bigint, p_signer bytea, p_owner_node text, p_fencing_token bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	RETURN EXISTS (
		SELECT 1 FROM signer_lease
		WHERE chain_id = p_chain_id AND signer = p_signer AND owner_node = p_owner_node
		  AND fencing_token = p_fencing_token AND expires_at > now()
		FOR KEY SHARE);
END
$$;
