package buildinfo

import "runtime/debug"

// Info is what the binary knows of its own build.
type Info struct {
	Version, Revision, Time, GoVersion string
}

func Read() Info {
	b := Info{Version: "(devel)", Revision: "unknown", Time: "unknown", GoVersion: "unknown"}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.GoVersion = info.GoVersion
	if info.Main.Version != "" {
		b.Version = info.Main.Version
	}
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified {
		b.Revision += "+dirty"
	}
	return b
}
