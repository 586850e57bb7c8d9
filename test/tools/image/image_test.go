package main

import (
	"archive/tar"
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// tarballPath is what `make image-oci` wrote (`make test` runs it first).
func tarballPath(t *testing.T) string {
	p := os.Getenv("KONGLET_OCI")
	if p == "" {
		p = filepath.Join("..", "..", "..", ".bin", "konglet.oci.tar")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no image tarball (%v): run make image-oci, or set KONGLET_OCI", err)
	}
	return p
}

// TestImage opens the tarball the two ways tools read it (crane's and
// docker's manifest.json; an OCI layout for podman and skopeo), which must
// give the same image, and checks that image: the config, a filesystem of
// /konglet alone, and the binary itself.
func TestImage(t *testing.T) {
	path := tarballPath(t)

	// docker load and crane push read manifest.json (crane push of a file
	// is tarball.ImageFromPath).
	fromTar, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatalf("crane cannot load %s: %v", path, err)
	}
	// podman load and skopeo read the OCI layout.
	dir := t.TempDir()
	untar(t, path, dir)
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("not an OCI layout: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("the layout holds %d images, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	if desc.Annotations["org.opencontainers.image.ref.name"] == "" || desc.Annotations["io.containerd.image.name"] == "" {
		t.Errorf("the layout's image has no name annotations: %v", desc.Annotations)
	}
	img, err := idx.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	// manifest.json has no manifest of its own (the loader makes a Docker
	// one): the same config and layers make the same image.
	if a, b := blobs(t, fromTar), blobs(t, img); !slices.Equal(a, b) {
		t.Errorf("manifest.json gives config and layers %v, the OCI layout %v", a, b)
	}

	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	if c.User != user || !slices.Equal(c.Entrypoint, []string{"/konglet"}) || !slices.Equal(c.Cmd, []string{"run"}) {
		t.Errorf("user %q, entrypoint %q, cmd %q: want %s, [/konglet], [run]", c.User, c.Entrypoint, c.Cmd, user)
	}
	version := c.Labels["org.opencontainers.image.version"]
	if version == "" || !strings.HasPrefix(c.Labels["org.opencontainers.image.source"], "https://") {
		t.Errorf("labels %v: want the version and the source", c.Labels)
	}
	if cfg.OS != "linux" || cfg.Architecture == "" {
		t.Errorf("platform %s/%s", cfg.OS, cfg.Architecture)
	}
	if desc.Annotations["org.opencontainers.image.ref.name"] != version {
		t.Errorf("the layout tags the image %q, its version label is %q", desc.Annotations["org.opencontainers.image.ref.name"], version)
	}
	if mt, _ := img.MediaType(); !strings.HasPrefix(string(mt), "application/vnd.oci.") {
		t.Errorf("manifest media type %s, want OCI", mt)
	}

	// The filesystem: /konglet, nothing else (no shell, no package manager).
	bin := filepath.Join(t.TempDir(), "konglet")
	files := filesystem(t, img, "konglet", bin)
	if !slices.Equal(files, []string{"konglet"}) {
		t.Errorf("the image holds %v, want konglet alone (no shell)", files)
	}

	t.Run("the binary runs", func(t *testing.T) {
		if cfg.Architecture != runtime.GOARCH {
			t.Skipf("the image is %s, this machine %s", cfg.Architecture, runtime.GOARCH)
		}
		out, err := exec.Command(bin, "version").CombinedOutput()
		if err != nil {
			t.Fatalf("konglet version: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != "konglet "+version {
			t.Errorf("konglet version says %q, the image's label %q", got, version)
		}
	})

	t.Run("the Dockerfile describes the same image", func(t *testing.T) {
		checkDockerfile(t, cfg, version)
	})
}

// blobs are the image's config digest and its layers' digests.
func blobs(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	cfg, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := []v1.Hash{cfg}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// filesystem lists the image's files (whiteouts and all) and copies one of
// them out.
func filesystem(t *testing.T, img v1.Image, name, to string) []string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var files []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, strings.TrimPrefix(h.Name, "/"))
		if strings.TrimPrefix(h.Name, "/") == name {
			if h.Mode&0o111 == 0 || h.Mode&0o022 != 0 {
				t.Errorf("%s has mode %o: want executable, writable by its owner (root) only", name, h.Mode)
			}
			f, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// checkDockerfile compares the Dockerfile's last stage with the config:
// user, entrypoint, command and labels (${VERSION} is the version).
func checkDockerfile(t *testing.T, cfg *v1.ConfigFile, version string) {
	f, err := os.Open(filepath.Join("..", "..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string // the last stage's instructions, continuations joined
	sc := bufio.NewScanner(f)
	cur := ""
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || line == "" && cur == "" {
			continue
		}
		if cont, ok := strings.CutSuffix(line, "\\"); ok {
			cur += cont + " "
			continue
		}
		line, cur = cur+line, ""
		if strings.HasPrefix(line, "FROM ") {
			lines = nil
		}
		lines = append(lines, line)
	}
	got := map[string]string{}
	labels := map[string]string{}
	for _, l := range lines {
		instr, args, _ := strings.Cut(l, " ")
		switch instr {
		case "USER", "ENTRYPOINT", "CMD":
			got[instr] = args
		case "LABEL":
			for _, kv := range splitLabels(args) {
				k, v, _ := strings.Cut(kv, "=")
				labels[k] = strings.ReplaceAll(strings.Trim(v, `"`), "${VERSION}", version)
			}
		}
	}
	jsonOf := func(v []string) string { b, _ := json.Marshal(v); return string(b) }
	want := map[string]string{"USER": cfg.Config.User, "ENTRYPOINT": jsonOf(cfg.Config.Entrypoint), "CMD": jsonOf(cfg.Config.Cmd)}
	for k, v := range want {
		if strings.ReplaceAll(got[k], ", ", ",") != v {
			t.Errorf("Dockerfile %s %s, the image has %s", k, got[k], v)
		}
	}
	if !maps.Equal(labels, cfg.Config.Labels) {
		t.Errorf("Dockerfile labels %v, the image's %v", labels, cfg.Config.Labels)
	}
}

// splitLabels splits `a="x y" b=z` on the spaces outside quotes.
func splitLabels(s string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
			cur.WriteRune(r)
		case r == ' ' && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

func untar(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(target, dir+string(filepath.Separator)) {
			t.Fatalf("%s escapes the folder", h.Name)
		}
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
