// Package ingest TODO.
package ingest
