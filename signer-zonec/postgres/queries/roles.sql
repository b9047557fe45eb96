-- signerd's two database roles (roles.go): migrate grants the serving role
-- exactly serving_grant (migration 0003), and serve refuses to start as a
-- role that holds more, or less, or owns anything.

-- name: GrantServingRole
-- Gives role $1 exactly the serving role's privileges, taking back what it
-- held before; run by the tables' owner after migrating.
SELECT grant_serving_role($1);

-- name: RoleCheck
-- What the current role is beyond its table privileges: a superuser
-- bypasses every check, a role that can create roles can make itself a
-- member of the owner, and one that owns or can create in the schema can
-- drop or shadow the tables. No row when the search path names no schema.
SELECT current_user::text, r.rolsuper, r.rolcreaterole, r.rolbypassrls,
	pg_has_role(n.nspowner, 'MEMBER') AS owns_schema,
	has_schema_privilege(n.oid, 'CREATE') AS creates_in_schema
FROM pg_roles r, pg_namespace n
WHERE r.rolname = current_user AND n.nspname = current_schema();

-- name: PrivilegeCheck
-- For every table and view of the schema and every table privilege,
-- whether the current role holds it (a privilege on any column counts),
-- whether serving_grant gives it, and whether the role owns the table or
-- is a member of its owner.
SELECT c.relname::text, p.privilege,
	CASE WHEN p.privilege IN ('SELECT', 'INSERT', 'UPDATE', 'REFERENCES')
		THEN has_any_column_privilege(c.oid, p.privilege)
		ELSE has_table_privilege(c.oid, p.privilege) END AS held,
	g.table_name IS NOT NULL AS granted,
	pg_has_role(c.relowner, 'MEMBER') AS owns
FROM pg_class c
CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) AS p(privilege)
LEFT JOIN serving_grant g ON g.table_name = c.relname AND g.privilege = p.privilege
WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
	AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
ORDER BY c.relname, p.privilege;
