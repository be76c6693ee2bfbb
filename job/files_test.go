package job

import (
	"errors"
	"strings"
	"testing"
)

func TestParseFiles(t *testing.T) {
	cases := []struct {
		name, line, want string
		files            []File
	}{
		{name: "path string", line: `{"id":"a","schema":"s","files":["receipt.png"]}`, files: []File{{Path: "receipt.png"}}},
		{name: "object with name", line: `{"id":"a","schema":"s","input":"x","files":[{"path":"a.pdf","name":"Contract"}]}`, files: []File{{Path: "a.pdf", Name: "Contract"}}},
		{name: "data url", line: `{"id":"a","schema":"s","files":[{"url":"data:image/png;base64,iVBO"}]}`, files: []File{{URL: "data:image/png;base64,iVBO"}}},
		{name: "reference", line: `{"id":"a","schema":"s","files":[{"name":"r.png","media_type":"image/png","bytes":3,"sha256":"` + strings.Repeat("a", 64) + `"}]}`,
			files: []File{{Name: "r.png", MediaType: MediaPNG, Bytes: 3, SHA256: strings.Repeat("a", 64)}}},
		{name: "no input no files", line: `{"id":"a","schema":"s"}`, want: `missing required field "input" (or "files")`},
		{name: "both path and url", line: `{"id":"a","schema":"s","files":[{"path":"a","url":"data:x"}]}`, want: `files[0]: give one of "path" or "url"`},
		{name: "empty object", line: `{"id":"a","schema":"s","files":[{}]}`, want: `files[0]: a file needs "path" or "url"`},
		{name: "http url", line: `{"id":"a","schema":"s","files":[{"url":"https://x/a.png"}]}`, want: `files[0]: "url" must be a data URL`},
		{name: "number", line: `{"id":"a","schema":"s","files":[3]}`, want: `field "files/0" must be a path or an object, got a number`},
		{name: "not array", line: `{"id":"a","schema":"s","files":"a.png"}`, want: `field "files" must be an array`},
		{name: "bad type ref", line: `{"id":"a","schema":"s","files":[{"media_type":"text/plain","bytes":3,"sha256":"` + strings.Repeat("a", 64) + `"}]}`, want: `media type "text/plain" is not one of`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j, err := Parse([]byte(c.line))
			if c.want != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("Parse = %v, want an error with %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(j.Files) != len(c.files) {
				t.Fatalf("files = %+v, want %+v", j.Files, c.files)
			}
			for i := range c.files {
				if j.Files[i] != c.files[i] {
					t.Fatalf("file %d = %+v, want %+v", i, j.Files[i], c.files[i])
				}
			}
		})
	}
}

func TestSniff(t *testing.T) {
	cases := []struct {
		head, want string
		ok         bool
	}{
		{"\x89PNG\r\n\x1a\n0000", MediaPNG, true},
		{"\xff\xd8\xff\xe0", MediaJPEG, true},
		{"GIF89a", MediaGIF, true},
		{"RIFF\x00\x00\x00\x00WEBPVP", MediaWebP, true},
		{"%PDF-1.7\n", MediaPDF, true},
		{"hello, I am a text file named .png", "text/plain", false},
	}
	for _, c := range cases {
		got, ok := Sniff([]byte(c.head))
		if got != c.want || ok != c.ok {
			t.Errorf("Sniff(%q) = %q, %v; want %q, %v", c.head, got, ok, c.want, c.ok)
		}
	}
}
