package main

import "runtime/debug"

// buildInfo is what the binary knows of its own build.
type buildInfo struct {
	version, revision, time, goVersion string
}

func readBuild() buildInfo {
	b := buildInfo{version: "(devel)", revision: "unknown", time: "unknown", goVersion: "unknown"}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.goVersion = info.GoVersion
	if info.Main.Version != "" {
		b.version = info.Main.Version
	}
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.revision = s.Value
		case "vcs.time":
			b.time = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified {
		b.revision += "+dirty"
	}
	return b
}
