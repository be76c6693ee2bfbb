package app

import "runtime/debug"

// Version is what the binary knows of its own build: the module version
// (v1.2.3, or "(devel)" for a build from a work tree) and the VCS revision
// the go command stamped into it.
type Version struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

// BuildVersion reads the binary's build info (runtime/debug.ReadBuildInfo).
func BuildVersion() Version {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return VersionFrom(bi)
}

// VersionFrom reads a build info; nil (a binary built without module
// support) gives "unknown".
func VersionFrom(bi *debug.BuildInfo) Version {
	v := Version{Module: "github.com/llmpipeline/pipeline", Version: "unknown"}
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
func (v Version) String() string {
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
