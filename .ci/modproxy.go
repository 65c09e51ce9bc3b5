//go:build ignore

// Command modproxy writes a module proxy directory, for
// GOPROXY=file://DIR, that serves every module of this repository's tree
// at one version: the root module without the nested modules' directories,
// and each nested module (a directory with a go.mod: goredis/), zipped as
// the go command zips them from a tag (the nested module's tag is
// goredis/vX.Y.Z, its version vX.Y.Z; it gets the root LICENSE when it has
// none). The files are the ones git tracks.
//
//	go run .ci/modproxy.go -version v0.3.0 -out DIR
package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

func main() {
	version := flag.String("version", "", "the version to serve every module at (vX.Y.Z)")
	out := flag.String("out", "", "the proxy directory to write")
	flag.Parse()
	if !strings.HasPrefix(*version, "v") || *out == "" {
		log.Fatal("usage: go run .ci/modproxy.go -version vX.Y.Z -out DIR")
	}
	ls, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		log.Fatalf("git ls-files: %v", err)
	}
	files := strings.Split(strings.TrimRight(string(ls), "\x00"), "\x00")
	when := time.Now().UTC()
	if t, err := exec.Command("git", "log", "-1", "--format=%cI").Output(); err == nil {
		if parsed, err := time.Parse(time.RFC3339, strings.TrimSpace(string(t))); err == nil {
			when = parsed.UTC()
		}
	}

	// Module roots: "" and every directory with a go.mod.
	roots := []string{""}
	for _, f := range files {
		if path.Base(f) == "go.mod" && f != "go.mod" {
			roots = append(roots, path.Dir(f))
		}
	}
	// Deepest first, so that a file goes to the innermost module.
	sort.Slice(roots, func(i, j int) bool { return len(roots[i]) > len(roots[j]) })
	byRoot := map[string][]string{}
	for _, f := range files {
		for _, r := range roots {
			if r == "" || strings.HasPrefix(f, r+"/") {
				byRoot[r] = append(byRoot[r], f)
				break
			}
		}
	}
	for _, r := range roots {
		if err := write(*out, r, byRoot[r], *version, when); err != nil {
			log.Fatal(err)
		}
	}
}

// write serves the module rooted at dir (relative to the repository).
func write(out, dir string, files []string, version string, when time.Time) error {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	modPath := ""
	for _, line := range strings.Split(string(gomod), "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			modPath = strings.Trim(strings.TrimSpace(p), `"`)
		}
	}
	if modPath == "" {
		return fmt.Errorf("%s/go.mod names no module", dir)
	}
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	prefix := modPath + "@" + version + "/"
	hasLicense := false
	add := func(name, file string) error {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		w, err := z.Create(prefix + name)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	for _, f := range files {
		name := f
		if dir != "" {
			name = strings.TrimPrefix(f, dir+"/")
		}
		if fi, err := os.Lstat(f); err != nil || !fi.Mode().IsRegular() {
			continue // symbolic links and the like are not in module zips
		}
		if name == "LICENSE" {
			hasLicense = true
		}
		if err := add(name, f); err != nil {
			return err
		}
	}
	if !hasLicense && dir != "" {
		if err := add("LICENSE", "LICENSE"); err != nil {
			return err
		}
	}
	if err := z.Close(); err != nil {
		return err
	}
	vdir := filepath.Join(out, escape(modPath), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, when})
	for name, data := range map[string][]byte{
		version + ".info": info,
		version + ".mod":  gomod,
		version + ".zip":  buf.Bytes(),
		"list":            []byte(version + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("%s@%s: %d files\n", modPath, version, len(files))
	return nil
}

// escape is a module path as proxies spell it: each capital letter as '!'
// and its lower case.
func escape(p string) string {
	var b strings.Builder
	for _, r := range p {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
