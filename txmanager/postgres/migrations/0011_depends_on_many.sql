-- A transaction may depend on several others, on any chain (the
-- destination of a transfer between chains waits for its source; a
-- transaction may wait for transfers on two chains): depends_on becomes an
-- array of 1 to 16 distinct transaction ids, in the client's order. The
-- worker reads all of a transaction's parents with one statement
-- (ParentStates) and goes on only when every one is CONFIRMED.

-- INIT events written before carry depends_on as a bare id; every output
-- gives the array from now on, the feed's replays included.
UPDATE event e SET payload = jsonb_set(e.payload, '{depends_on}', jsonb_build_array(e.payload -> 'depends_on'))
FROM tx
WHERE tx.depends_on IS NOT NULL AND e.tx_id = tx.tx_id AND e.type = 'tx.state_changed'
  AND jsonb_typeof(e.payload -> 'depends_on') = 'string';

-- A new column, filled from the old one where a transaction has a parent,
-- rather than ALTER ... TYPE, which would rewrite every row of the table.
-- Dropping the old column drops its foreign key (tx_depends_on_fkey).
ALTER TABLE tx ADD COLUMN depends_on_many uuid[];
UPDATE tx SET depends_on_many = ARRAY[depends_on] WHERE depends_on IS NOT NULL;
ALTER TABLE tx DROP COLUMN depends_on;
ALTER TABLE tx RENAME COLUMN depends_on_many TO depends_on;

-- Whether an array holds each element once (NULL for no array).
CREATE FUNCTION txfence_distinct(ids uuid[]) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
	SELECT count(DISTINCT id) = count(*) FROM unnest(ids) AS id
$$;

ALTER TABLE tx
	ADD CONSTRAINT tx_depends_on_shape CHECK (depends_on IS NULL OR (array_ndims(depends_on) = 1
		AND cardinality(depends_on) BETWEEN 1 AND 16 AND array_position(depends_on, NULL) IS NULL AND txfence_distinct(depends_on))),
	ADD CONSTRAINT tx_depends_on_self CHECK (NOT tx_id = ANY (depends_on));

-- A foreign key cannot cover an array's elements: this trigger refuses a
-- parent that does not exist as the key did (SQLSTATE 23503, constraint
-- tx_depends_on_fkey), naming every missing one in the DETAIL, comma
-- separated. Transactions are never deleted, so, unlike the key, it need
-- not lock the parents. Rows without parents never call it (WHEN). The
-- row itself among its parents is left to tx_depends_on_self, checked
-- after this trigger has run.
CREATE FUNCTION txfence_parents_exist() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	missing text;
BEGIN
	SELECT string_agg(p.id::text, ',' ORDER BY p.n) INTO missing
	FROM unnest(NEW.depends_on) WITH ORDINALITY AS p(id, n)
	WHERE p.id <> NEW.tx_id AND NOT EXISTS (SELECT 1 FROM tx WHERE tx.tx_id = p.id);
	IF missing IS NOT NULL THEN
		RAISE EXCEPTION 'depends_on names no transaction: %', missing
			USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'tx_depends_on_fkey', TABLE = 'tx', DETAIL = missing;
	END IF;
	RETURN NEW;
END
$$;

CREATE TRIGGER tx_depends_on_fkey BEFORE INSERT OR UPDATE OF depends_on ON tx
	FOR EACH ROW WHEN (NEW.depends_on IS NOT NULL) EXECUTE FUNCTION txfence_parents_exist();
