package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// releaseBinaryPages unmaps konglet's own code and read-only data: the
// pages the start touched once (client-go's scheme registers every API
// group, which reads type data all over the binary) and those the kernel
// mapped around each one touched (64 KiB a fault, or a whole large folio
// of the page cache). They stay in the page cache, clean and reclaimable,
// and the next touch maps one back with a minor fault: what stays resident
// is what konglet uses. Only a mapping of the executable that is private,
// not writable and holds no page of its own (a relocated or patched page
// would revert to the file) is released. It tells how many resident bytes
// it unmapped (not freed: the page cache keeps them).
func releaseBinaryPages() (uint64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	mappings, err := readOnlyMappings(smaps, exe)
	if err != nil {
		return 0, err
	}
	if len(mappings) == 0 {
		return 0, fmt.Errorf("no read-only mapping of %s without pages of its own in /proc/self/smaps", exe)
	}
	var released uint64
	for _, m := range mappings {
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, m.start, m.end-m.start, syscall.MADV_DONTNEED); errno != 0 {
			return released, fmt.Errorf("madvise %x-%x: %w", m.start, m.end, errno)
		}
		released += m.rss
	}
	return released, nil
}

// mapping is one read-only mapping of the executable, with its resident
// bytes.
type mapping struct {
	start, end uintptr
	rss        uint64
}

// readOnlyMappings reads /proc/self/smaps for the mappings of file that
// are private, not writable, and said to hold no page of their own: none
// copied on write, in memory (Anonymous) or swapped out (Swap). A kernel
// that does not say both is not trusted.
func readOnlyMappings(smaps []byte, file string) ([]mapping, error) {
	var out []mapping
	var cur *mapping
	var anonymous, swap *uint64
	flush := func() {
		if cur != nil && anonymous != nil && *anonymous == 0 && swap != nil && *swap == 0 {
			out = append(out, *cur)
		}
		cur, anonymous, swap = nil, nil, nil
	}
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if key, ok := strings.CutSuffix(f[0], ":"); ok {
			// A field of the current mapping ("Rss:", "Anonymous:", ...).
			if cur == nil || len(f) < 2 {
				continue
			}
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				continue
			}
			switch key {
			case "Rss":
				cur.rss = kb << 10
			case "Anonymous":
				anonymous = &kb
			case "Swap":
				swap = &kb
			}
			continue
		}
		// A mapping's first line: start-end perms offset dev inode path.
		flush()
		if len(f) < 6 || strings.Join(f[5:], " ") != file || (f[1] != "r-xp" && f[1] != "r--p") {
			continue
		}
		start, end, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		s, err1 := strconv.ParseUint(start, 16, 64)
		e, err2 := strconv.ParseUint(end, 16, 64)
		if err1 != nil || err2 != nil || e <= s {
			continue
		}
		cur = &mapping{start: uintptr(s), end: uintptr(e)}
	}
	flush()
	return out, sc.Err()
}
