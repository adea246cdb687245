package doccheck

import (
	"fmt"
	"strings"
)

// A block is a fenced code block of a Markdown file.
type block struct {
	file string // the Markdown file, as the caller named it
	line int    // the line of the opening fence, from 1
	info string // the fence's info string, such as "go" or "go fragment"
	code string // the lines between the fences, without the fence's indentation
}

// lang returns the first word of the block's info string: its language.
func (b block) lang() string {
	f := strings.Fields(b.info)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// isGo reports whether the block is fenced as Go.
func (b block) isGo() bool { return b.lang() == "go" }

// isFragment reports whether the block is a Go fragment that is not to be
// compiled: fenced as ```go fragment.
func (b block) isFragment() bool {
	f := strings.Fields(b.info)
	return len(f) > 1 && f[0] == "go" && f[1] == "fragment"
}

// codeLine returns the Markdown line of the block's first line of code.
func (b block) codeLine() int { return b.line + 1 }

// lastLine returns the Markdown line of the block's last line of code.
func (b block) lastLine() int { return b.line + strings.Count(b.code, "\n") }

// blocks returns the fenced code blocks of Markdown file src, named file,
// in order. A fence is three or more backticks or tildes, indented by at
// most three spaces, as CommonMark has it; the block ends at a fence of the
// same character at least as long. A fence never closed is an error, as it
// is nearly always a mistake that hides the rest of the file.
func blocks(file string, src string) ([]block, error) {
	lines := strings.Split(src, "\n")
	var out []block
	for i := 0; i < len(lines); i++ {
		indent, char, n, info, ok := fence(lines[i])
		if !ok {
			continue
		}
		if char == '`' && strings.ContainsRune(info, '`') {
			continue // an inline code span, not a fence
		}
		b := block{file: file, line: i + 1, info: info}
		var code []string
		closed := false
		for i++; i < len(lines); i++ {
			if _, c, m, rest, ok := fence(lines[i]); ok && c == char && m >= n && rest == "" {
				closed = true
				break
			}
			code = append(code, dedent(lines[i], indent))
		}
		if !closed {
			return out, fmt.Errorf("%s:%d: the fence is never closed", file, b.line)
		}
		b.code = strings.Join(code, "\n") + "\n"
		out = append(out, b)
	}
	return out, nil
}

// fence reports whether line is a code fence, and returns its indentation,
// character, length and info string.
func fence(line string) (indent int, char byte, n int, info string, ok bool) {
	for indent < len(line) && indent < 4 && line[indent] == ' ' {
		indent++
	}
	if indent > 3 || indent == len(line) || (line[indent] != '`' && line[indent] != '~') {
		return 0, 0, 0, "", false
	}
	char = line[indent]
	for indent+n < len(line) && line[indent+n] == char {
		n++
	}
	if n < 3 {
		return 0, 0, 0, "", false
	}
	return indent, char, n, strings.TrimSpace(line[indent+n:]), true
}

// dedent removes up to indent spaces from the start of line, as a fenced
// block's content loses its fence's indentation.
func dedent(line string, indent int) string {
	for i := 0; i < indent && strings.HasPrefix(line, " "); i++ {
		line = line[1:]
	}
	return line
}
