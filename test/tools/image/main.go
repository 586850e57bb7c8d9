// Command image assembles konglet's container image without a Docker
// engine: the static konglet binary as the one layer on an empty base,
// numeric non-root user 65532, entrypoint /konglet, OCI labels with the
// version and the source. It writes one tarball that is both an OCI image
// layout (index.json, blobs/; podman load, skopeo, crane push of the
// unpacked folder) and a docker save archive (manifest.json pointing into
// blobs/; docker load, crane push). `make image-oci` runs it; the Dockerfile
// describes the same image (image_test.go checks that).
package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: distroless's "nonroot" (the Dockerfile's base), and
// the runAsUser of deploy/helm/values.yaml.
const user = "65532:65532"

type options struct {
	binary, version, source, repository, arch, out string
	created                                        time.Time
}

func main() {
	var o options
	var created string
	flag.StringVar(&o.binary, "binary", "", "the static konglet binary (CGO_ENABLED=0, GOOS=linux)")
	flag.StringVar(&o.version, "version", "", "the version: label org.opencontainers.image.version and the tag")
	flag.StringVar(&o.source, "source", "https://github.com/konglet/konglet", "label org.opencontainers.image.source")
	flag.StringVar(&o.repository, "repository", "ghcr.io/konglet/konglet", "the name docker load tags the image with")
	flag.StringVar(&o.arch, "arch", runtime.GOARCH, "the binary's architecture")
	flag.StringVar(&created, "created", "1970-01-01T00:00:00Z", "the image's creation time (RFC 3339): fixed, so that a build is reproducible")
	flag.StringVar(&o.out, "o", "konglet.oci.tar", "the tarball to write")
	flag.Parse()
	var err error
	if o.created, err = time.Parse(time.RFC3339, created); err != nil {
		fail(err)
	}
	if o.binary == "" || o.version == "" {
		fail(fmt.Errorf("-binary and -version are required"))
	}
	if err := build(o); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "image:", err)
	os.Exit(1)
}

func build(o options) error {
	img, err := assemble(o)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "konglet-oci-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ref := o.repository + ":" + o.version
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	// ref.name is the tag within the layout (podman load, skopeo);
	// containerd and docker load of an OCI layout read the full name.
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": o.version,
		"io.containerd.image.name":          ref,
	})); err != nil {
		return err
	}
	if err := writeDockerManifest(dir, img, ref); err != nil {
		return err
	}
	return tarDir(dir, o.out, o.created)
}

// assemble builds the image: one layer holding /konglet, no base.
func assemble(o options) (v1.Image, error) {
	bin, err := os.ReadFile(o.binary)
	if err != nil {
		return nil, err
	}
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	// Owned by root and not writable by the user it runs as.
	if err := tw.WriteHeader(&tar.Header{Name: "konglet", Mode: 0o755, Size: int64(len(bin)), ModTime: o.created, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar.Bytes())), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: o.created}, CreatedBy: "konglet image: /konglet"}})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", o.arch
	cfg.Created = v1.Time{Time: o.created}
	cfg.Config = v1.Config{
		User:       user,
		Entrypoint: []string{"/konglet"},
		Cmd:        []string{"run"},
		WorkingDir: "/",
		Labels: map[string]string{
			"org.opencontainers.image.version": o.version,
			"org.opencontainers.image.source":  o.source,
			"org.opencontainers.image.title":   "konglet",
		},
	}
	return mutate.ConfigFile(img, cfg)
}

// writeDockerManifest adds docker save's manifest.json, pointing at the
// layout's blobs: docker load and crane's tarball loader read it.
func writeDockerManifest(dir string, img v1.Image, ref string) error {
	cfg, err := img.ConfigName()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	entry := struct {
		Config   string
		RepoTags []string
		Layers   []string
	}{Config: blobPath(cfg), RepoTags: []string{ref}}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		entry.Layers = append(entry.Layers, blobPath(d))
	}
	b, err := json.Marshal([]any{entry})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644)
}

func blobPath(h v1.Hash) string {
	return "blobs/" + h.Algorithm + "/" + h.Hex
}

// tarDir writes the folder as a tarball: sorted, owned by root, with one
// modification time, so that the same inputs give the same bytes.
func tarDir(dir, out string, mtime time.Time) error {
	var paths []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != dir {
			paths = append(paths, p)
		}
		return err
	}); err != nil {
		return err
	}
	slices.Sort(paths)
	f, err := os.CreateTemp(filepath.Dir(out), ".konglet-oci-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	tw := tar.NewWriter(f)
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		name, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: filepath.ToSlash(name), ModTime: mtime, Format: tar.FormatPAX, Mode: 0o644, Typeflag: tar.TypeReg, Size: st.Size()}
		if st.IsDir() {
			h.Name, h.Mode, h.Typeflag, h.Size = h.Name+"/", 0o755, tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !st.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if _, err := tw.Write(b); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	// The tarball appears whole or not at all.
	return os.Rename(f.Name(), out)
}
