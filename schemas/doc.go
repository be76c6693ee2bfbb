// Package schemas TODO.
package schemas
