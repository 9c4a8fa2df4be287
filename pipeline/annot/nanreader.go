package annot

import (
	"bytes"
	"io"
)

// nanReader passes JSON through, turning the bare words NaN, Infinity and
// -Infinity (which Python's json writes, and JSON has not) into 1e999,
// -1e999: numbers that no float64 holds, so that a box of NaNs is the
// error of its annotation, not of the whole file.
type nanReader struct {
	r        io.Reader
	inString bool
	escape   bool
	pending  []byte
	buf      [32 << 10]byte
	carry    []byte // an incomplete word at the end of the last read
	eof      bool
}

func (n *nanReader) Read(p []byte) (int, error) {
	for len(n.pending) == 0 {
		if n.eof {
			if len(n.carry) > 0 {
				n.pending, n.carry = n.carry, nil
				break
			}
			return 0, io.EOF
		}
		k, err := n.r.Read(n.buf[:])
		chunk := append(n.carry, n.buf[:k]...)
		n.carry = nil
		if err == io.EOF {
			n.eof = true
		} else if err != nil {
			return 0, err
		}
		n.pending = n.rewrite(chunk)
	}
	k := copy(p, n.pending)
	n.pending = n.pending[k:]
	return k, nil
}

// rewrite turns the words in chunk, keeping back a possible incomplete
// word at its end in n.carry (unless at EOF).
func (n *nanReader) rewrite(chunk []byte) []byte {
	out := make([]byte, 0, len(chunk)+16)
	for i := 0; i < len(chunk); i++ {
		ch := chunk[i]
		if n.inString {
			out = append(out, ch)
			switch {
			case n.escape:
				n.escape = false
			case ch == '\\':
				n.escape = true
			case ch == '"':
				n.inString = false
			}
			continue
		}
		switch ch {
		case '"':
			n.inString = true
		case 'N', 'I', '-':
			for _, w := range [...]struct{ word, with string }{{"NaN", "1e999"}, {"Infinity", "1e999"}, {"-Infinity", "-1e999"}} {
				rest := chunk[i:]
				if bytes.HasPrefix(rest, []byte(w.word)) {
					out = append(out, w.with...)
					i += len(w.word) - 1
					goto next
				}
				if !n.eof && len(rest) < len(w.word) && bytes.HasPrefix([]byte(w.word), rest) {
					n.carry = append([]byte(nil), rest...)
					return out
				}
			}
		}
		out = append(out, ch)
	next:
	}
	return out
}
