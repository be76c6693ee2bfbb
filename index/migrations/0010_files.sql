-- The files (images, PDFs) each run's job named: name, media type, bytes
-- and sha256, never the bytes (those stay in the object store, by digest).
-- A purge deletes a stored file when no run left here, nor a job on the
-- queue, names its digest.
CREATE TABLE outcome_files (
	outcome_id INTEGER NOT NULL REFERENCES outcomes (id) ON DELETE CASCADE,
	seq        INTEGER NOT NULL,
	sha256     TEXT    NOT NULL,
	name       TEXT    NOT NULL,
	media_type TEXT    NOT NULL,
	bytes      INTEGER NOT NULL,
	PRIMARY KEY (outcome_id, seq)
);
CREATE INDEX outcome_files_by_digest ON outcome_files (sha256);
