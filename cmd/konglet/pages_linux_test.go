package main

import (
	"bytes"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestReadOnlyMappingsOfTheExecutable: only the executable's private,
// read-only mappings said to hold no page of their own (Anonymous and Swap
// both present and 0) are released, whatever the order of their fields.
func TestReadOnlyMappingsOfTheExecutable(t *testing.T) {
	const exe = "/usr/local/bin/my konglet"
	smaps := `Rss:                 999 kB
Anonymous:             0 kB
00400000-00c36000 r-xp 00000000 fd:01 1234 /usr/local/bin/my konglet
Size:               8408 kB
Rss:                6000 kB
Anonymous:             0 kB
Swap:                  0 kB
VmFlags: rd ex mr mw me
00c36000-01800000 r--p 00836000 fd:01 1234 /usr/local/bin/my konglet
Anonymous:             0 kB
Swap:                  0 kB
Rss:                9000 kB
01800000-01900000 r--p 01400000 fd:01 1234 /usr/local/bin/my konglet
Rss:                 100 kB
Anonymous:             4 kB
01900000-01a00000 rw-p 01500000 fd:01 1234 /usr/local/bin/my konglet
Rss:                 200 kB
Anonymous:           200 kB
01a00000-01b00000 rw-p 00000000 00:00 0
Rss:                 300 kB
Anonymous:           300 kB
7f0000000000-7f0000100000 r-xp 00000000 fd:01 99 /usr/lib/other.so
Rss:                 400 kB
Anonymous:             0 kB
7f0000100000-7f0000200000 r--s 00000000 fd:01 1234 /usr/local/bin/my konglet
Rss:                 500 kB
Anonymous:             0 kB
7f0000200000-7f0000300000 r--p 01600000 fd:01 1234 /usr/local/bin/my konglet
Rss:                 600 kB
Swap:                  0 kB
7f0000300000-7f0000400000 r--p 01700000 fd:01 1234 /usr/local/bin/my konglet
Rss:                 700 kB
Anonymous:             0 kB
Swap:                  4 kB
7f0000400000-7f0000500000 r--p 01800000 fd:01 1234 /usr/local/bin/my konglet
Rss:                 800 kB
Anonymous:             0 kB
7f0000500000-7f0000600000 r-xp 00000000 fd:01 1235 /usr/local/bin/my konglet2
Rss:                 900 kB
Anonymous:             0 kB
Swap:                  0 kB
`
	got, err := readOnlyMappings([]byte(smaps), exe)
	if err != nil {
		t.Fatal(err)
	}
	want := []mapping{{0x400000, 0xc36000, 6000 << 10}, {0xc36000, 0x1800000, 9000 << 10}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("mapping %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestReleaseBinaryPagesOfThisProcess releases this test binary's own
// pages: each released mapping held the file's bytes before (so nothing of
// the process's own was dropped) and holds them after, its resident file
// pages go down, and its code still runs.
func TestReleaseBinaryPagesOfThisProcess(t *testing.T) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	mappings, err := readOnlyMappings(smaps, exe)
	if err != nil || len(mappings) == 0 {
		t.Fatalf("mappings of %s: %v, %v", exe, mappings, err)
	}
	sameAsFile := func(when string) {
		t.Helper()
		for _, m := range mappings {
			mem, file := readAt(t, "/proc/self/mem", int64(m.start), m.end-m.start), readAt(t, exe, fileOffset(t, smaps, m.start), m.end-m.start)
			if !bytes.Equal(mem, file) {
				t.Fatalf("%s: mapping %x-%x differs from %s", when, m.start, m.end, exe)
			}
		}
	}
	sameAsFile("before the release")
	before := rssFile(t)
	released, err := releaseBinaryPages()
	if err != nil {
		t.Fatal(err)
	}
	after := rssFile(t)
	if released == 0 || after >= before {
		t.Fatalf("released %d bytes: RssFile %d -> %d kB", released, before, after)
	}
	sameAsFile("after the release")
	// Code and read-only data come back on use: a GC walks the runtime's
	// tables, a sort runs code this test had not run.
	runtime.GC()
	if s := slices.Sorted(slices.Values([]string{"b", "c", "a"})); strings.Join(s, "") != "abc" {
		t.Fatalf("sorted %q after the release", s)
	}
	t.Logf("released %d KiB: RssFile %d -> %d kB", released>>10, before, after)
}

// readAt reads n bytes of file at offset.
func readAt(t *testing.T, file string, offset int64, n uintptr) []byte {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, offset); err != nil {
		t.Fatalf("%s at %x: %v", file, offset, err)
	}
	return b
}

// fileOffset is the file offset smaps gives the mapping that starts at
// start.
func fileOffset(t *testing.T, smaps []byte, start uintptr) int64 {
	t.Helper()
	prefix := strconv.FormatUint(uint64(start), 16) + "-"
	for _, line := range strings.Split(string(smaps), "\n") {
		// Addresses are printed with at least 8 hex digits.
		if f := strings.Fields(line); len(f) > 2 && strings.HasPrefix(strings.TrimLeft(f[0], "0"), prefix) {
			off, err := strconv.ParseInt(f[2], 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return off
		}
	}
	t.Fatalf("no mapping at %x", start)
	return 0
}

// rssFile is the process's resident file-backed memory in kB.
func rssFile(t *testing.T) uint64 {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}
