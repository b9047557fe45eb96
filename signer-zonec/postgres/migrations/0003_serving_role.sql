-- signerd serves as a role of its own that does not own these tables: the
-- owner (which migrates) can switch the append-only triggers off, the
-- serving role cannot, and it holds no UPDATE, DELETE or TRUNCATE on the
-- audit log or the signature record, so the database itself refuses to
-- change them. `signerd migrate` grants the serving role exactly the
-- privileges below, and `signerd serve` refuses to start holding more.

-- What the serving role may do, table by table; nothing else.
CREATE VIEW serving_grant (table_name, privilege) AS VALUES
	('schema_migrations', 'SELECT'), -- readiness: is the schema at this build's version
	('serving_grant',     'SELECT'), -- serve checks its own privileges against this list
	('signer_lock',       'SELECT'),
	('signer_lock',       'INSERT'), -- a signer's row, the first time it signs
	('signer_lock',       'UPDATE'), -- SELECT ... FOR UPDATE needs it; no column is ever changed
	('signature',         'SELECT'),
	('signature',         'INSERT'),
	('audit_log',         'SELECT'),
	('audit_log',         'INSERT'),
	('audit_head',        'SELECT'),
	('audit_head',        'UPDATE'), -- appends advance it; audit_head_advances refuses anything else
	('nonce_start',       'SELECT'); -- an operator declares start nonces, as the owner

-- grant_serving_role gives serving exactly serving_grant on this schema's
-- tables, after revoking whatever it held, so running it again (every
-- migrate does) also takes back anything granted by hand since.
CREATE FUNCTION grant_serving_role(serving name) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	g record;
	r record;
BEGIN
	-- Two migrates at once would otherwise race on the same privileges
	-- ("tuple concurrently updated").
	PERFORM pg_advisory_xact_lock(hashtextextended('txfence.grant_serving_role.' || current_schema(), 0));
	SELECT rolsuper, pg_has_role(serving, current_user, 'MEMBER') AS is_owner INTO r
		FROM pg_roles WHERE rolname = serving;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'serving role % does not exist: create it (LOGIN, no other attributes) first', serving
			USING ERRCODE = 'undefined_object';
	ELSIF r.is_owner THEN
		RAISE EXCEPTION 'serving role % is, or is a member of, %, which owns signerd''s tables: serve as another role', serving, current_user
			USING ERRCODE = 'invalid_grant_operation';
	ELSIF r.rolsuper THEN
		RAISE EXCEPTION 'serving role % is a superuser: serve as an ordinary role', serving
			USING ERRCODE = 'invalid_grant_operation';
	END IF;
	EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM %I', current_schema(), serving);
	EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM %I', current_schema(), serving);
	IF NOT has_schema_privilege(serving, current_schema(), 'USAGE') THEN
		EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', current_schema(), serving);
	END IF;
	FOR g IN SELECT table_name, privilege FROM serving_grant LOOP
		EXECUTE format('GRANT %s ON TABLE %I.%I TO %I', g.privilege, current_schema(), g.table_name, serving);
	END LOOP;
END
$$;

REVOKE EXECUTE ON FUNCTION grant_serving_role(name) FROM PUBLIC;

-- The head only moves forward, and only onto a record of the log: the
-- serving role must update it to append, and this keeps it from rewinding
-- it. The owner can still drop this trigger; the signed checkpoints
-- signerd writes outside the database are what catch that. The log is
-- named through the trigger's own schema, so that a temporary table of the
-- same name (temporary tables come first in a search path) cannot stand in
-- for it.
CREATE FUNCTION audit_head_advances() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	on_record boolean;
BEGIN
	EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.audit_log WHERE seq = $1 AND hash = $2)', TG_TABLE_SCHEMA)
		INTO on_record USING NEW.seq, NEW.hash;
	IF NEW.seq <= OLD.seq OR NOT on_record THEN
		RAISE EXCEPTION 'audit_head may only advance onto a record of audit_log: % to % refused', OLD.seq, NEW.seq
			USING ERRCODE = 'integrity_constraint_violation';
	END IF;
	RETURN NEW;
END
$$;

CREATE TRIGGER audit_head_advances BEFORE UPDATE ON audit_head
	FOR EACH ROW EXECUTE FUNCTION audit_head_advances();
CREATE TRIGGER audit_head_no_delete BEFORE DELETE ON audit_head
	FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER audit_head_no_truncate BEFORE TRUNCATE ON audit_head
	FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
