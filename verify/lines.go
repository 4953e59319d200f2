package verify

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// lineReader reads lines of any length from a bufio.Reader, keeping at most max bytes of each
// (bufio.Scanner would stop at its token limit instead).
type lineReader struct {
	r    *bufio.Reader
	max  int
	buf  []byte
	read int64 // bytes consumed
}

func newLineReader(r io.Reader, max int) *lineReader {
	br, ok := r.(*bufio.Reader)
	if !ok || br.Size() < 64<<10 {
		br = bufio.NewReaderSize(r, 64<<10)
	}
	return &lineReader{r: br, max: max}
}

// next returns the next line without its "\n" (and "\r"). cut says bytes past max were dropped;
// eol says the line ended with "\n" (false only for a last line cut off at EOF). err is io.EOF
// when nothing is left.
func (l *lineReader) next() (line []byte, cut, eol bool, err error) {
	if l.read == 0 {
		// A UTF-8 byte order mark (Windows tools write one) is not part of the first line.
		if head, _ := l.r.Peek(len(utf8BOM)); bytes.Equal(head, utf8BOM) {
			_, _ = l.r.Discard(len(utf8BOM))
			l.read += int64(len(utf8BOM))
		}
	}
	frag, err := l.r.ReadSlice('\n')
	l.read += int64(len(frag))
	if err == nil {
		return trimEOL(frag), false, true, nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		if len(frag) == 0 {
			return nil, false, false, err
		}
		if errors.Is(err, io.EOF) {
			return trimEOL(frag), false, false, nil
		}
		return nil, false, false, err
	}
	// A long line: gather up to max bytes, drop the rest.
	l.buf = append(l.buf[:0], frag...)
	for {
		frag, err = l.r.ReadSlice('\n')
		l.read += int64(len(frag))
		if room := l.max - len(l.buf); room > 0 {
			l.buf = append(l.buf, frag[:min(room, len(frag))]...)
		}
		if len(l.buf) >= l.max {
			cut = true
		}
		switch {
		case err == nil:
			return trimEOL(l.buf), cut, true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return trimEOL(l.buf), cut, false, nil
		default:
			return nil, false, false, err
		}
	}
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}
