package batch

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// FilesHeld adds to out the digests of the stored files the jobs batch
// mode holds in kv (PIPELINE_BATCHES) name: a job handed to batch mode is
// acked on JOBS, and until its outcome is stored on RESULTS or DLQ its
// item here is the only record of it, and its answer still needs its
// files. Every item counts, whatever its state.
func FilesHeld(ctx context.Context, kv jetstream.KeyValue, out map[string]bool) error {
	s := store{kv: kv}
	keys, err := s.keys(ctx, prefixItem)
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil
		}
		return err
	}
	for _, k := range keys {
		it, _, err := s.getItem(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		var j struct {
			Files []json.RawMessage `json:"files"`
		}
		if json.Unmarshal(it.Job, &j) != nil {
			continue // not an object: it names no stored file
		}
		for _, raw := range j.Files {
			var f struct {
				SHA256 string `json:"sha256"`
			}
			if json.Unmarshal(raw, &f) == nil && f.SHA256 != "" {
				out[f.SHA256] = true
			}
		}
	}
	return nil
}
