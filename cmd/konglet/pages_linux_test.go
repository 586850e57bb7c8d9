package main

import (
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestReadOnlyMappingsOfTheExecutable: only the executable's private,
// read-only mappings said to hold no page of their own are released.
func TestReadOnlyMappingsOfTheExecutable(t *testing.T) {
	const exe = "/usr/local/bin/my konglet"
	smaps := `00400000-00c36000 r-xp 00000000 fd:01 1234 /usr/local/bin/my konglet
Size:               8408 kB
Rss:                6000 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
00c36000-01800000 r--p 00836000 fd:01 1234 /usr/local/bin/my konglet
Rss:                9000 kB
Anonymous:             0 kB
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
`
	got := readOnlyMappings([]byte(smaps), exe)
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
// pages: its resident file pages go down, and its code still runs.
func TestReleaseBinaryPagesOfThisProcess(t *testing.T) {
	before := rssFile(t)
	released, err := releaseBinaryPages()
	if err != nil {
		t.Fatal(err)
	}
	after := rssFile(t)
	if released == 0 || after >= before {
		t.Fatalf("released %d bytes: RssFile %d -> %d kB", released, before, after)
	}
	// Code and read-only data come back on use: a GC walks the runtime's
	// tables, a sort runs code this test had not run.
	runtime.GC()
	if s := slices.Sorted(slices.Values([]string{"b", "c", "a"})); strings.Join(s, "") != "abc" {
		t.Fatalf("sorted %q after the release", s)
	}
	t.Logf("released %d KiB: RssFile %d -> %d kB", released>>10, before, after)
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
