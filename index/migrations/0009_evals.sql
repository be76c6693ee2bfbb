-- Evals (pipeline eval): the validated data of every result, which the
-- eval joins with labelled values, and the stored figures of every eval,
-- so that runs can be compared per schema version and model.
--
-- result_data holds a succeeded run's data as JSON text (the Outcome's
-- data member, compact); the payload keeps everything else. Results
-- indexed before this migration have no row here: `pipeline dlq rebuild`
-- indexes them again from the RESULTS stream, data included.
CREATE TABLE result_data (
	outcome_id INTEGER PRIMARY KEY REFERENCES outcomes (id) ON DELETE CASCADE,
	data       TEXT    NOT NULL
);

-- One row per group (schema, version, model) of one eval: an eval over a
-- file whose jobs ran at two schema versions writes two rows with the
-- same eval_id. The rows are the user's, not the streams': dlq rebuild and
-- retention keep them. fields is a JSON object, field path ->
-- {"correct", "wrong", "missing", "extra"}.
CREATE TABLE evals (
	id          INTEGER PRIMARY KEY,
	eval_id     INTEGER NOT NULL,  -- one per `pipeline eval`: the rowid of its first row
	at          INTEGER NOT NULL,  -- Unix milliseconds (UTC)
	file        TEXT    NOT NULL,  -- the labelled file as given
	digest      TEXT    NOT NULL,  -- sha256:<hex> of the labelled file's bytes
	schema_id   TEXT    NOT NULL,  -- '' for labelled ids with no outcome in the index
	version     TEXT    NOT NULL,
	model       TEXT    NOT NULL,  -- the model of the final answer (or of the dead letter)
	records     INTEGER NOT NULL,
	with_result INTEGER NOT NULL,
	no_result   INTEGER NOT NULL,
	exact       INTEGER NOT NULL,
	correct     INTEGER NOT NULL,
	wrong       INTEGER NOT NULL,
	missing     INTEGER NOT NULL,
	extra       INTEGER NOT NULL,
	fields      TEXT    NOT NULL
);
CREATE INDEX evals_by_schema ON evals (schema_id, version, at);

-- One row per group of every eval, with ISO 8601 times and the figures
-- computed: precision = correct / (correct + wrong + extra), recall =
-- correct / (correct + wrong + missing), f1 their harmonic mean (0 when
-- a denominator or both are 0).
CREATE VIEW v_evals AS
SELECT
	e.eval_id,
	printf('%s.%03dZ', strftime('%Y-%m-%dT%H:%M:%S', e.at / 1000, 'unixepoch'), e.at % 1000) AS at,
	e.file,
	e.digest,
	e.schema_id,
	e.version,
	e.model,
	e.records,
	e.with_result,
	e.no_result,
	e.exact,
	e.correct,
	e.wrong,
	e.missing,
	e.extra,
	CASE WHEN e.correct + e.wrong + e.extra > 0 THEN CAST(e.correct AS REAL) / (e.correct + e.wrong + e.extra) ELSE 0 END AS precision,
	CASE WHEN e.correct + e.wrong + e.missing > 0 THEN CAST(e.correct AS REAL) / (e.correct + e.wrong + e.missing) ELSE 0 END AS recall,
	CASE WHEN e.correct > 0 THEN 2.0 * e.correct / (2 * e.correct + 2 * e.wrong + e.missing + e.extra) ELSE 0 END AS f1,
	e.fields                                               -- JSON object: field path -> {correct, wrong, missing, extra}
FROM evals e;
