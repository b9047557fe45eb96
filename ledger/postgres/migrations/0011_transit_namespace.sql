-- Transit ids per tenant: the gateway puts each tenant's transactions in a
-- namespace of its own (txmanager's INIT event carries it beside the
-- client's transit id), and the ledger keys a transit by "namespace~id",
-- so that one tenant can neither pair a transaction with another tenant's
-- transfer nor take an id another tenant uses. Transits linked before
-- keep their bare ids, which no namespaced id can equal ('~' is in no
-- client's id).
ALTER TABLE transit DROP CONSTRAINT transit_transit_id_check;
ALTER TABLE transit ADD CONSTRAINT transit_transit_id_check
    CHECK (transit_id ~ '^([A-Za-z0-9._:-]{1,36}~)?[A-Za-z0-9._:-]{1,128}$');
