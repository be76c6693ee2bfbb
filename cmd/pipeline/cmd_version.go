package main

import (
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// version is what the binary knows of its own build: the module version
// (v1.2.3, or "(devel)" for a build from a work tree) and the VCS revision
// the go command stamped into it.
type version struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

// buildVersion reads the binary's build info (runtime/debug.ReadBuildInfo).
func buildVersion() version {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return versionFrom(bi)
}

// versionFrom reads a build info; nil (a binary built without module
// support) gives "unknown".
func versionFrom(bi *debug.BuildInfo) version {
	v := version{Module: "github.com/llmpipeline/pipeline", Version: "unknown"}
	if bi == nil {
		return v
	}
	v.Go = bi.GoVersion
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the one-line form: "v1.2.3 (rev 0123abcd, modified, go1.26.8)".
func (v version) String() string {
	s := v.Version + " ("
	if v.Revision != "" {
		rev := v.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += "rev " + rev + ", "
		if v.Modified {
			s += "modified, "
		}
	}
	return s + v.Go + ")"
}

func (e *env) versionCommand() *cli.Command {
	return &cli.Command{
		Name:      "version",
		Usage:     "print the module version and VCS revision of this binary (as --version does)",
		ArgsUsage: " ",
		Flags:     []cli.Flag{jsonFlag()},
		Action: func(c *cli.Context) error {
			v := buildVersion()
			if c.Bool("json") {
				b, err := json.Marshal(v)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(e.stdout, "%s\n", b)
				return err
			}
			_, err := fmt.Fprintf(e.stdout, "pipeline version %s\n", v)
			return err
		},
	}
}
