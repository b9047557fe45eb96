package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The statements of queries/roles.sql.
var (
	qGrantServingRole = Queries.Use("GrantServingRole")
	qRoleCheck        = Queries.Use("RoleCheck")
	qPrivilegeCheck   = Queries.Use("PrivilegeCheck")
)

// signerd's database has two roles. The owner owns the schema and its
// tables and runs the migrations; signerd serves as the serving role,
// which holds only the privileges of the serving_grant view (migration
// 0003): it may append to the audit log and the signature record but not
// change or remove a row, and, owning nothing, cannot switch a trigger
// off. Whoever holds the owner can still rewrite the log; the checkpoints
// signerd signs and keeps outside the database are what catch that.

// GrantServing gives role exactly the serving role's privileges on the
// schema pool's search path names, taking back whatever it held before.
// pool connects as the owner; signerd migrate calls it after migrating.
func GrantServing(ctx context.Context, pool *pgxpool.Pool, role string) error {
	if _, err := pool.Exec(ctx, qGrantServingRole.SQL, role); err != nil {
		return fmt.Errorf("grant the serving role %s its privileges: %w", role, err)
	}
	return nil
}

// RoleError lists what is wrong with the role signerd serves as.
type RoleError struct {
	Role     string
	Problems []string
}

func (e *RoleError) Error() string {
	return fmt.Sprintf("database role %s is not fit to serve signerd: %s", e.Role, strings.Join(e.Problems, "; "))
}

// CheckServingRole checks that the role pool connects as holds exactly the
// serving role's privileges and owns nothing: signerd serve refuses to
// start otherwise. A *RoleError names every problem.
func CheckServingRole(ctx context.Context, pool *pgxpool.Pool) error {
	var role string
	var super, createRole, bypassRLS, ownsSchema, createsInSchema bool
	err := pool.QueryRow(ctx, qRoleCheck.SQL).Scan(&role, &super, &createRole, &bypassRLS, &ownsSchema, &createsInSchema)
	if errors.Is(err, pgx.ErrNoRows) {
		return errors.New("check the database role: the search path names no schema")
	}
	if err != nil {
		return fmt.Errorf("check the database role: %w", err)
	}
	var problems []string
	if super {
		problems = append(problems, "is a superuser")
	}
	if createRole {
		problems = append(problems, "can create roles (CREATEROLE)")
	}
	if bypassRLS {
		problems = append(problems, "bypasses row security (BYPASSRLS)")
	}
	if ownsSchema {
		problems = append(problems, "owns the schema")
	}
	if createsInSchema {
		problems = append(problems, "may create objects in the schema")
	}

	rows, err := pool.Query(ctx, qPrivilegeCheck.SQL)
	if err != nil {
		return fmt.Errorf("check the database role's privileges (has signerd migrate run?): %w", err)
	}
	owned := map[string]bool{}
	var table, privilege string
	var held, granted, owns bool
	_, err = pgx.ForEachRow(rows, []any{&table, &privilege, &held, &granted, &owns}, func() error {
		switch {
		case owns:
			if !owned[table] {
				owned[table] = true
				problems = append(problems, "owns "+table)
			}
		case held && !granted:
			problems = append(problems, fmt.Sprintf("holds %s on %s", privilege, table))
		case !held && granted:
			problems = append(problems, fmt.Sprintf("lacks %s on %s", privilege, table))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("check the database role's privileges (has signerd migrate run?): %w", err)
	}
	if len(problems) > 0 {
		return &RoleError{Role: role, Problems: problems}
	}
	return nil
}
