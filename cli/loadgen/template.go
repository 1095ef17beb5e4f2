package loadgen

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// Placeholders of a request template (`perpd bench http`). A template is
// literal text with placeholders written {{name}} or {{name:argument}}.
// JSON never holds "{{" outside a string, so a JSON body is written as is.
// Inside an argument the first "}}" closes it.
const (
	PhWorker = "worker" // the worker's index, from 0
	PhSeq    = "seq"    // the worker's request number, from 0
	PhRun    = "run"    // 8 random hex characters, the same for the whole run
	PhUUID   = "uuid"   // a fresh random UUID (version 4) at every expansion
	PhKey    = "key"    // the worker's API key (--perpd-signup)
	PhAlt    = "alt"    // {{alt:a|b|c}}: option seq mod 3, so a worker alternates
	PhB64    = "b64"    // {{b64:text}}: the standard base64 of text, itself expanded
)

// Bounds of a template.
const (
	MaxTemplateBytes = 64 << 10
	MaxTemplateDepth = 4 // placeholders inside arguments inside arguments...
	MaxAltOptions    = 64
)

// Template is a parsed request template. The zero value expands to "".
type Template struct{ parts []tmplPart }

// tmplPart is literal text (name "") or one placeholder.
type tmplPart struct {
	lit  string
	name string
	args []Template // alt: the options; b64: the one text
}

// Vars are what placeholders expand to for one request.
type Vars struct {
	Worker int
	Seq    uint64
	Run    string
	Key    string
}

// ParseTemplate reads s, refusing unknown placeholders, a missing or
// unexpected argument, an unclosed "{{", and templates past the bounds.
func ParseTemplate(s string) (Template, error) {
	if len(s) > MaxTemplateBytes {
		return Template{}, fmt.Errorf("template is %d bytes, more than %d", len(s), MaxTemplateBytes)
	}
	p := &tmplParser{s: s}
	t, err := p.seq(0, false)
	if err != nil {
		return Template{}, err
	}
	return t, nil
}

type tmplParser struct {
	s string
	i int
}

// seq reads parts until the end of input or, inside an argument (depth >
// 0), until the "}}" that closes it (left unread), or a "|" when the
// argument is an alt option.
func (p *tmplParser) seq(depth int, alt bool) (Template, error) {
	var t Template
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, tmplPart{lit: lit.String()})
			lit.Reset()
		}
	}
	for p.i < len(p.s) {
		rest := p.s[p.i:]
		switch {
		case strings.HasPrefix(rest, "{{"):
			flush()
			p.i += 2
			part, err := p.placeholder(depth + 1)
			if err != nil {
				return Template{}, err
			}
			t.parts = append(t.parts, part)
		case depth > 0 && strings.HasPrefix(rest, "}}"):
			flush()
			return t, nil
		case alt && rest[0] == '|':
			flush()
			return t, nil
		default:
			lit.WriteByte(rest[0])
			p.i++
		}
	}
	if depth > 0 {
		return Template{}, fmt.Errorf("template: unclosed {{ (a placeholder or its argument has no closing }})")
	}
	flush()
	return t, nil
}

// placeholder reads what follows a "{{", up to and including its "}}".
func (p *tmplParser) placeholder(depth int) (tmplPart, error) {
	if depth > MaxTemplateDepth {
		return tmplPart{}, fmt.Errorf("template: placeholders nested more than %d deep", MaxTemplateDepth)
	}
	start := p.i
	for p.i < len(p.s) && p.s[p.i] != ':' && !strings.HasPrefix(p.s[p.i:], "}}") {
		p.i++
	}
	if p.i == len(p.s) {
		return tmplPart{}, fmt.Errorf("template: unclosed {{%s", p.s[start:])
	}
	name := strings.TrimSpace(p.s[start:p.i])
	hasArg := p.s[p.i] == ':'
	part := tmplPart{name: name}
	switch name {
	case PhWorker, PhSeq, PhRun, PhUUID, PhKey:
		if hasArg {
			return tmplPart{}, fmt.Errorf("template: {{%s}} takes no argument", name)
		}
	case PhAlt, PhB64:
		if !hasArg {
			return tmplPart{}, fmt.Errorf("template: {{%s:...}} needs an argument", name)
		}
		p.i++ // the ':'
		for {
			arg, err := p.seq(depth, name == PhAlt)
			if err != nil {
				return tmplPart{}, err
			}
			part.args = append(part.args, arg)
			if len(part.args) > MaxAltOptions {
				return tmplPart{}, fmt.Errorf("template: {{alt}} has more than %d options", MaxAltOptions)
			}
			if p.i < len(p.s) && p.s[p.i] == '|' {
				p.i++
				continue
			}
			break
		}
		if name == PhAlt && len(part.args) < 2 {
			return tmplPart{}, fmt.Errorf("template: {{alt:...}} needs at least two options separated by |")
		}
	case "":
		return tmplPart{}, fmt.Errorf("template: empty placeholder {{}}")
	default:
		return tmplPart{}, fmt.Errorf("template: unknown placeholder {{%s}} (known: %s)", name,
			strings.Join([]string{PhWorker, PhSeq, PhRun, PhUUID, PhKey, PhAlt + ":a|b", PhB64 + ":text"}, ", "))
	}
	if !strings.HasPrefix(p.s[p.i:], "}}") {
		return tmplPart{}, fmt.Errorf("template: {{%s}} is not closed by }}", name)
	}
	p.i += 2
	return part, nil
}

// Uses reports whether the template has the placeholder name anywhere.
func (t Template) Uses(name string) bool {
	for _, p := range t.parts {
		if p.name == name {
			return true
		}
		for _, a := range p.args {
			if a.Uses(name) {
				return true
			}
		}
	}
	return false
}

// Static reports whether the template is plain text (expands the same
// every time).
func (t Template) Static() bool {
	for _, p := range t.parts {
		if p.name != "" {
			return false
		}
	}
	return true
}

// Append expands the template for v onto dst.
func (t Template) Append(dst []byte, v *Vars) []byte {
	for _, p := range t.parts {
		switch p.name {
		case "":
			dst = append(dst, p.lit...)
		case PhWorker:
			dst = strconv.AppendInt(dst, int64(v.Worker), 10)
		case PhSeq:
			dst = strconv.AppendUint(dst, v.Seq, 10)
		case PhRun:
			dst = append(dst, v.Run...)
		case PhKey:
			dst = append(dst, v.Key...)
		case PhUUID:
			dst = appendUUID(dst)
		case PhAlt:
			dst = p.args[v.Seq%uint64(len(p.args))].Append(dst, v)
		case PhB64:
			inner := p.args[0].Append(nil, v)
			n := len(dst)
			dst = append(dst, make([]byte, base64.StdEncoding.EncodedLen(len(inner)))...)
			base64.StdEncoding.Encode(dst[n:], inner)
		}
	}
	return dst
}

// String expands the template for v.
func (t Template) String(v *Vars) string { return string(t.Append(nil, v)) }

// appendUUID appends a random version 4 UUID: crypto randomness, so two
// runs never share one (it is meant for idempotency keys and unique keys).
func appendUUID(dst []byte) []byte {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("loadgen: no randomness: " + err.Error())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], b[10:16])
	return append(dst, s[:]...)
}

// newRunID is the {{run}} of one run.
func newRunID() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("loadgen: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}
