package verify

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// xmlCleaner sits between a JUnit file and encoding/xml. It fixes what test tools get wrong and
// bounds what the decoder holds:
//   - a UTF-8 byte order mark is dropped;
//   - control characters XML forbids (raw, or as &#x1b; references), in text and in attribute
//     values, become '?';
//   - invalid UTF-8 in a UTF-8 document becomes '?';
//   - a text or CDATA run longer than 2×keep bytes (a 50 MB system-out) is cut to its last keep
//     bytes, from a line start, after a marker saying how much was dropped.
//
// It is a state machine over markup (tags with quoted attributes, comments, CDATA, processing
// instructions) that moves runs of bytes at a time, so it only rewrites character data and
// attribute values.
type xmlCleaner struct {
	r       *bufio.Reader
	keep    int
	state   int
	out     []byte // ready to be read from pos on
	pos     int
	txt     []byte // current text or CDATA run, or the current tag
	dropped int64  // bytes cut from the current run
	quote   byte
	last    []byte // last bytes of a comment or processing instruction, to find its end
	checked bool   // the XML declaration was looked at
	utf8    bool
	err     error
	cuts    int // runs that were cut
}

const (
	xsText = iota
	xsTag
	xsCDATA
	xsComment
	xsPI
)

const maxTag = 1 << 20 // a tag longer than this is passed on in pieces

func newXMLCleaner(r io.Reader, keep int) *xmlCleaner {
	return &xmlCleaner{r: bufio.NewReaderSize(r, 64<<10), keep: keep, utf8: true}
}

func (c *xmlCleaner) Read(p []byte) (int, error) {
	for c.pos == len(c.out) {
		if c.err != nil {
			return 0, c.err
		}
		c.out, c.pos = c.out[:0], 0 // reuse the buffer: no garbage per chunk
		c.fill()
	}
	n := copy(p, c.out[c.pos:])
	c.pos += n
	return n, nil
}

func (c *xmlCleaner) checkDecl() {
	c.checked = true
	head, _ := c.r.Peek(512)
	if bytes.HasPrefix(head, utf8BOM) {
		_, _ = c.r.Discard(len(utf8BOM))
		head = head[len(utf8BOM):]
	}
	if bytes.HasPrefix(head, []byte("<?xml")) {
		if end := bytes.Index(head, []byte("?>")); end > 0 {
			decl := bytes.ToLower(head[:end])
			if i := bytes.Index(decl, []byte("encoding=")); i > 0 && !bytes.Contains(decl[i:], []byte("utf-8")) {
				c.utf8 = false
			}
		}
	}
}

func (c *xmlCleaner) fill() {
	if !c.checked {
		c.checkDecl()
	}
	chunk, err := c.r.Peek(32 << 10)
	if len(chunk) == 0 {
		if c.state == xsTag {
			c.out = c.sanitize(c.out, c.txt, true)
			c.txt = c.txt[:0]
		} else {
			c.flushText()
		}
		if err == nil || err == bufio.ErrBufferFull {
			err = io.EOF
		}
		c.err = err
		return
	}
	for i := 0; i < len(chunk); {
		switch c.state {
		case xsText:
			j := bytes.IndexByte(chunk[i:], '<')
			if j < 0 {
				c.addText(chunk[i:])
				i = len(chunk)
				continue
			}
			c.addText(chunk[i : i+j])
			c.flushText()
			c.state = xsTag
			c.txt = append(c.txt[:0], '<')
			i += j + 1
		case xsTag:
			b := chunk[i]
			i++
			c.txt = append(c.txt, b)
			if len(c.txt) <= 9 {
				next := -1
				switch string(c.txt) {
				case "<![CDATA[":
					next = xsCDATA
				case "<!--":
					next = xsComment
				case "<?":
					next = xsPI
				}
				if next >= 0 {
					c.out = append(c.out, c.txt...)
					c.txt = c.txt[:0]
					c.state = next
					continue
				}
			}
			switch {
			case c.quote != 0:
				if b == c.quote {
					c.quote = 0
				}
			case b == '"' || b == '\'':
				c.quote = b
			case b == '>':
				c.out = c.sanitize(c.out, c.txt, true)
				c.txt = c.txt[:0]
				c.state = xsText
			}
			if len(c.txt) > maxTag {
				c.out = c.sanitize(c.out, c.txt, true)
				c.txt = c.txt[:0]
			}
		case xsCDATA:
			j := bytes.IndexByte(chunk[i:], '>')
			if j < 0 {
				c.addText(chunk[i:])
				i = len(chunk)
				continue
			}
			c.addText(chunk[i : i+j+1])
			i += j + 1
			if bytes.HasSuffix(c.txt, []byte("]]>")) {
				c.txt = c.txt[:len(c.txt)-3]
				c.flushText()
				c.out = append(c.out, "]]>"...)
				c.state = xsText
			}
		case xsComment, xsPI:
			end := []byte("-->")
			if c.state == xsPI {
				end = []byte("?>")
			}
			// The end marker may straddle reads: c.last keeps the last bytes passed on.
			j := bytes.IndexByte(chunk[i:], '>')
			seg := chunk[i:]
			if j >= 0 {
				seg = chunk[i : i+j+1]
			}
			c.out = append(c.out, seg...)
			i += len(seg)
			c.last = append(c.last, seg[max(0, len(seg)-3):]...)
			c.last = c.last[max(0, len(c.last)-3):]
			if j >= 0 && bytes.HasSuffix(c.last, end) {
				c.state = xsText
				c.last = c.last[:0]
			}
		}
	}
	_, _ = c.r.Discard(len(chunk))
}

// addText adds character data, cutting the run to its tail when it grows too long.
func (c *xmlCleaner) addText(p []byte) {
	c.txt = append(c.txt, p...)
	if len(c.txt) <= 2*c.keep {
		return
	}
	cut := len(c.txt) - c.keep
	// Start the kept part at a line start so no entity, reference or UTF-8 sequence is split;
	// in CDATA keep a possible "]]" that the next bytes may close.
	if nl := bytes.IndexByte(c.txt[cut:], '\n'); nl >= 0 {
		cut += nl + 1
	} else if c.state == xsCDATA {
		cut = len(c.txt) - 2
	} else {
		cut = len(c.txt)
		// Outside CDATA an unfinished reference could be cut: keep from the last '&'.
		if amp := bytes.LastIndexByte(c.txt, '&'); amp >= 0 && len(c.txt)-amp < 12 {
			cut = amp
		}
	}
	if c.dropped == 0 {
		c.cuts++
	}
	c.dropped += int64(cut)
	c.txt = append(c.txt[:0], c.txt[cut:]...)
}

// flushText cleans the current run and moves it to the output.
func (c *xmlCleaner) flushText() {
	if c.dropped > 0 {
		c.out = append(c.out, fmt.Sprintf("[… %d bytes cut …]\n", c.dropped)...)
		c.dropped = 0
	}
	c.out = c.sanitize(c.out, c.txt, c.state != xsCDATA)
	c.txt = c.txt[:0]
}

// sanitize appends t to dst with forbidden characters replaced by '?'; refs says character
// references are live (text and attributes, not CDATA).
func (c *xmlCleaner) sanitize(dst, t []byte, refs bool) []byte {
	for i := 0; i < len(t); {
		b := t[i]
		switch {
		case b < 0x20 && b != '\t' && b != '\n' && b != '\r':
			dst = append(dst, '?')
			i++
		case b == '&' && refs && i+2 < len(t) && t[i+1] == '#':
			end := bytes.IndexByte(t[i:min(len(t), i+12)], ';')
			if end < 0 {
				dst = append(dst, "&amp;"...)
				i++
				continue
			}
			ref := t[i+2 : i+end]
			var v uint64
			var err error
			if len(ref) > 0 && (ref[0] == 'x' || ref[0] == 'X') {
				v, err = strconv.ParseUint(string(ref[1:]), 16, 32)
			} else {
				v, err = strconv.ParseUint(string(ref), 10, 32)
			}
			if err != nil || !xmlChar(rune(v)) {
				dst = append(dst, '?')
			} else {
				dst = append(dst, t[i:i+end+1]...)
			}
			i += end + 1
		case b >= 0x80 && c.utf8:
			r, size := utf8.DecodeRune(t[i:])
			if r == utf8.RuneError && size <= 1 || !xmlChar(r) {
				dst = append(dst, '?')
			} else {
				dst = append(dst, t[i:i+size]...)
			}
			i += max(size, 1)
		default:
			// Copy the run of plain bytes in one go.
			j := i + 1
			for j < len(t) && t[j] >= 0x20 && t[j] < 0x80 && t[j] != '&' {
				j++
			}
			dst = append(dst, t[i:j]...)
			i = j
		}
	}
	return dst
}

// xmlChar reports whether r may appear in an XML 1.0 document.
func xmlChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}
