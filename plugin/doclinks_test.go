package plugin

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The operator's manual: README.md is the one screen an operator reads
// first, and every page of docs/ and CONTRIBUTING.md is reachable from it.

// mdLink is an inline markdown link; its target is group 1.
var mdLink = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)

// codeSpan is an inline code span, whose text is no link.
var codeSpan = regexp.MustCompile("`[^`]*`")

// manualPages lists README.md, CONTRIBUTING.md and docs/*.md, relative to
// the module root.
func manualPages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages := []string{"README.md", "CONTRIBUTING.md"}
	for _, d := range docs {
		pages = append(pages, filepath.ToSlash(strings.TrimPrefix(d, "../")))
	}
	sort.Strings(pages[2:])
	return pages
}

// mdLinks lists the link targets of markdown text, outside code blocks and
// code spans.
func mdLinks(text string) []string {
	var out []string
	fence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// mdAnchors lists the anchors GitHub gives the headings of markdown text:
// lower case, punctuation dropped, spaces as hyphens, a repeated one
// suffixed -1, -2, ...
func mdAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if fence || !strings.HasPrefix(line, "#") || !ok {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(title)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a += "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		anchors[a] = true
	}
	return anchors
}

// TestREADMELinksEveryPage: the README links every page of the manual, so
// none is found only by browsing the tree.
func TestREADMELinksEveryPage(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, target := range mdLinks(string(readme)) {
		file, _, _ := strings.Cut(target, "#")
		linked[filepath.ToSlash(filepath.Clean(file))] = true
	}
	for _, page := range manualPages(t) {
		if page != "README.md" && !linked[page] {
			t.Errorf("README.md does not link %s", page)
		}
	}
}

// TestManualLinksResolve: every relative link of the manual names a file or
// folder that exists, and an anchor names a heading of its page.
func TestManualLinksResolve(t *testing.T) {
	texts := map[string]string{}
	read := func(page string) (string, bool) {
		if s, ok := texts[page]; ok {
			return s, true
		}
		b, err := os.ReadFile("../" + page)
		if err != nil {
			return "", false
		}
		texts[page] = string(b)
		return string(b), true
	}
	for _, page := range manualPages(t) {
		text, ok := read(page)
		if !ok {
			t.Errorf("%s is missing", page)
			continue
		}
		for _, target := range mdLinks(text) {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(page), file)))
				if _, err := os.Stat("../" + dest); err != nil {
					t.Errorf("%s links %s: %s does not exist", page, target, dest)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			destText, _ := read(dest)
			if !mdAnchors(destText)[anchor] {
				t.Errorf("%s links %s: %s has no heading with anchor #%s", page, target, dest, anchor)
			}
		}
	}
}
