package index

import (
	"bytes"
	"compress/flate"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/llmpipeline/pipeline/job"

	"github.com/klauspost/compress/s2"
)

// A payload is the whole Outcome but its data, as JSON text: the
// transcript Get and Export return and the v_* views read (see
// migrations/0005_views.sql). Files written before migration 5 stored it
// with an encoding number beside it, compressed above a size; the
// migration converts those rows to text (convertPayloads).
const (
	encJSON    = 0 // plain JSON
	encDeflate = 1 // DEFLATE (written by schema version 1 above 4 KB)
	encS2      = 2 // S2 (github.com/klauspost/compress/s2), written by schema versions 2 to 4
)

// readPayload decodes a stored payload (JSON text) into the Outcome.
func readPayload(body []byte) (job.Outcome, error) { return decodePayload(encJSON, body) }

func decodePayload(enc int, body []byte) (job.Outcome, error) {
	data, err := payloadJSON(enc, body)
	if err != nil {
		return job.Outcome{}, err
	}
	var o job.Outcome
	if err := jsonv2.Unmarshal(data, &o, job.DecodeOptions()); err != nil {
		return job.Outcome{}, fmt.Errorf("decoding payload: %w", err)
	}
	normalize(&o)
	return o, nil
}

// payloadJSON is a payload's JSON, decompressed.
func payloadJSON(enc int, body []byte) ([]byte, error) {
	switch enc {
	case encJSON:
		return body, nil
	case encDeflate:
		data, err := io.ReadAll(flate.NewReader(bytes.NewReader(body)))
		if err != nil {
			return nil, fmt.Errorf("decompressing payload: %w", err)
		}
		return data, nil
	case encS2:
		data, err := s2.Decode(nil, body)
		if err != nil {
			return nil, fmt.Errorf("decompressing payload: %w", err)
		}
		return data, nil
	}
	return nil, fmt.Errorf("payload encoding %d unknown", enc)
}

// normalize makes the empty slices of a decoded payload nil, as they were
// when Write encoded the Outcome (every slice field is omitempty): a payload
// spliced from a message keeps the message's empty arrays.
func normalize(o *job.Outcome) {
	if len(o.Trace) == 0 {
		o.Trace = nil
	}
	for i := range o.Trace {
		a := &o.Trace[i]
		if len(a.Repairs) == 0 {
			a.Repairs = nil
		}
		if len(a.Diagnostics) == 0 {
			a.Diagnostics = nil
		}
	}
}

// beforeMigration runs the Go part of a migration, in its transaction,
// before its SQL: what SQL alone cannot do.
func beforeMigration(ctx context.Context, tx *sql.Tx, version int) error {
	if version == 5 {
		return convertPayloads(ctx, tx)
	}
	return nil
}

// convertChunk is how many compressed payloads convertPayloads holds in
// memory at a time.
const convertChunk = 500

// convertPayloads rewrites every compressed payload (encoding 1 or 2) of a
// file written before migration 5 as JSON text with encoding 0, so the
// migration's SQL can move every row into the text table as it is. A body
// that does not decompress becomes a JSON object naming the error (the
// streams still hold the message: `pipeline dlq rebuild` restores it), so
// one bad row does not keep the file from opening.
func convertPayloads(ctx context.Context, tx *sql.Tx) error {
	type conv struct {
		id   int64
		body string
	}
	var last int64
	for {
		rows, err := tx.QueryContext(ctx, `SELECT outcome_id, encoding, body FROM payloads
			WHERE encoding <> 0 AND outcome_id > ? ORDER BY outcome_id LIMIT ?`, last, convertChunk)
		if err != nil {
			return fmt.Errorf("reading compressed payloads: %w", err)
		}
		var batch []conv
		for rows.Next() {
			var id int64
			var enc int
			var body []byte
			if err := rows.Scan(&id, &enc, &body); err != nil {
				rows.Close()
				return fmt.Errorf("reading compressed payloads: %w", err)
			}
			text, err := payloadJSON(enc, body)
			if err == nil && !json.Valid(text) {
				err = fmt.Errorf("payload is not JSON")
			}
			if err != nil {
				msg, _ := json.Marshal(map[string]string{"unreadable_payload": err.Error()})
				text = msg
			}
			batch = append(batch, conv{id, string(text)})
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return fmt.Errorf("reading compressed payloads: %w", err)
		}
		if len(batch) == 0 {
			return nil
		}
		for _, c := range batch {
			if _, err := tx.ExecContext(ctx, `UPDATE payloads SET encoding = 0, body = ? WHERE outcome_id = ?`, c.body, c.id); err != nil {
				return fmt.Errorf("rewriting the payload of outcome %d as text: %w", c.id, err)
			}
		}
		last = batch[len(batch)-1].id
	}
}
