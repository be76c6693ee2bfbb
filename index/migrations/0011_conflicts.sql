-- Long documents (issue 27): the fields where a document's chunks answered
-- different values, one row per document run and field path (the path as
-- recorded, array indices kept; the report groups them with indices as *).
CREATE TABLE conflicts (
	outcome_id INTEGER NOT NULL REFERENCES outcomes (id) ON DELETE CASCADE,
	path       TEXT    NOT NULL,
	chunks     INTEGER NOT NULL,  -- chunks that gave a value, the kept one included
	PRIMARY KEY (outcome_id, path)
) WITHOUT ROWID;
