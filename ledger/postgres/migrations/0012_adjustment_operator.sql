-- Who asked for each adjustment. ledgerd books an adjustment only from the
-- gateway's operator path, which names the operator (an admin API key and
-- its tenant) and, above the gateway's approval threshold, the second key
-- that approved it; both also go into the journal's memo. One row per
-- adjustment, written in the transaction that books its journal, never
-- changed. Adjustments booked before this migration have none.
CREATE TABLE adjustment (
    adjustment_id       text        PRIMARY KEY CHECK (adjustment_id ~ '^[A-Za-z0-9._:-]{1,128}$'),
    journal_id          bigint      NOT NULL UNIQUE REFERENCES journal,
    operator_key_id     uuid        NOT NULL,
    operator_key_name   text        NOT NULL CHECK (operator_key_name <> '' AND length(operator_key_name) <= 100),
    tenant_id           uuid        NOT NULL,
    tenant_name         text        NOT NULL CHECK (tenant_name <> '' AND length(tenant_name) <= 100),
    -- The approving key, of the same tenant; NULL when the gateway needed
    -- none (at or below its threshold).
    approver_key_id     uuid,
    approver_key_name   text        CHECK (approver_key_name <> '' AND length(approver_key_name) <= 100),
    booked_at           timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT adjustment_approver_whole CHECK (num_nulls(approver_key_id, approver_key_name) IN (0, 2)),
    CONSTRAINT adjustment_second_key CHECK (approver_key_id <> operator_key_id),
    -- Ids are per tenant: the tenant's id and ':' start each.
    CONSTRAINT adjustment_id_of_tenant CHECK (starts_with(adjustment_id, tenant_id::text || ':'))
);

CREATE INDEX adjustment_tenant_idx ON adjustment (tenant_id, booked_at);

CREATE TRIGGER adjustment_append_only BEFORE UPDATE OR DELETE ON adjustment
    FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER adjustment_no_truncate BEFORE TRUNCATE ON adjustment
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
